/** One unit of background work, due at `run_at`, held by at most one process at a time (its lease). */
export interface JobsTable {
  id: string;
  /** What the job does: the name a domain registered its JobKind under. */
  kind: string;
  /** Jobs of one lane are claimed together and may be paused together (an endpoint's deliveries); null for most. */
  lane: string | null;
  /** At most one job per key exists (one check per machine, one tick per schedule); scheduling it again moves it. */
  key: string | null;
  /** JSON, as the kind defines it. */
  payload: string;
  run_at: number;
  /** Consecutive failed attempts: the input of the kind's retry policy. */
  attempts: number;
  /** The lease: the process running the job, and until when; expired, any process may take it over. */
  locked_by: string | null;
  locked_until: number | null;
  last_error: string | null;
  created_at: number;
}

/** A lane exists while its jobs may: closing it cancels them (closeLane), pausing it holds them where they are. */
export interface JobLanesTable {
  lane: string;
  paused: number;
}
