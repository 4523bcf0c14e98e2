import type { FastifyBaseLogger } from 'fastify';
import type { Clock, Timer } from '../shared/clock.ts';
import type { Job, JobKind } from './job-kind.ts';
import type { LaneAdmission, LanedJobKind } from './laned-kind.ts';

/** A kind as a runner keeps it: how long its leases last, and its attempts in flight in this process. */
export type Kind = {
  name: string;
  leaseMs: number;
  inFlight: number;
  /** Lanes with jobs waiting for one of the kind's slots. */
  waiting: Set<Lane>;
} & ({ laned: false; kind: JobKind<unknown> } | { laned: true; kind: LanedJobKind<unknown, unknown, unknown> });

/** A job held by this runner; a laned kind's, with what its kind loaded for it or what the enqueuer handed over (undefined: not loaded yet). */
export interface HeldJob {
  job: Job<unknown>;
  work?: unknown;
}

/** Jobs of one kind and lane that this runner holds: those waiting in memory, and how many are in flight. */
export interface Lane {
  kind: Kind;
  /** Null for a plain kind: its jobs are one queue, admitted by the kind's concurrency alone. */
  name: string | null;
  queue: HeldJob[];
  inFlight: number;
  /** The database may hold more due jobs of this lane than the last claim took. */
  backlog: boolean;
  /** A claim for it is under way. */
  filling: boolean;
  timer: Timer | null;
}

export interface LaneDeps {
  clock: Clock;
  logger: FastifyBaseLogger;
  stopping(): boolean;
  /** Claims up to `room` due jobs of the lane into its queue. */
  claim(lane: Lane, room: number): Promise<void>;
  /** Starts an attempt; `attemptEnded` is called when it ends. */
  start(lane: Lane, held: HeldJob): void;
}

/**
 * Admission: which of the jobs a runner holds start now, by each kind's
 * concurrency and each lane's admission (a failing lane is slowed down), and
 * when to claim more of a lane from the database.
 */
export interface Lanes {
  /** Whether a job of this kind and lane, due now, can start here at once. */
  accepts(kind: Kind, lane: string | null): boolean;
  /** Jobs leased to this runner, to start in their turn. */
  enqueue(kind: Kind, held: HeldJob[]): void;
  /** The database holds due jobs of the lane. */
  markDue(kind: Kind, lane: string | null): void;
  attemptEnded(lane: Lane): void;
  /** Takes up to `limit` of the jobs the lane holds, unstarted. */
  take(kind: Kind, lane: string, limit: number): Array<Job<unknown>>;
  /** Claims under way (a claim between two statements must not outlive the database). */
  readonly claims: ReadonlySet<Promise<void>>;
  /** Forgets every lane; answers the jobs held unstarted. */
  clear(): Array<Job<unknown>>;
}

const laneKey = (kind: string, lane: string | null) => (lane === null ? kind : `${kind}\u0000${lane}`);

export function createLanes(deps: LaneDeps): Lanes {
  const { clock, logger } = deps;
  const lanes = new Map<string, Lane>();
  const claims = new Set<Promise<void>>();

  function laneOf(kind: Kind, name: string | null): Lane {
    const key = laneKey(kind.name, name);
    let lane = lanes.get(key);
    if (lane === undefined) {
      lane = { kind, name, queue: [], inFlight: 0, backlog: false, filling: false, timer: null };
      lanes.set(key, lane);
    }
    return lane;
  }

  function dropIfIdle(lane: Lane): void {
    if (lane.queue.length === 0 && lane.inFlight === 0 && !lane.filling && !lane.backlog && lane.timer === null) {
      lanes.delete(laneKey(lane.kind.name, lane.name));
      lane.kind.waiting.delete(lane);
    }
  }

  /**
   * Starts what the lane holds and may start now; when it holds nothing and
   * the database may hold more, claims them (the one thing here that waits on
   * I/O), then goes on. Called whenever something changes: a handover, an
   * attempt ending, a poll, a timer.
   */
  function pump(lane: Lane): void {
    if (deps.stopping()) return;
    startAdmitted(lane);
    if (lane.queue.length > 0 || !lane.backlog || lane.filling) return dropIfIdle(lane);
    // More may be held than the admission asks (handovers of transactions that committed together, or a lane
    // slowed down since): they are leased to this runner already, and wait their turn here.
    const admission = admissionOf(lane);
    const room = admission.limit + admission.hold - lane.inFlight;
    if (room <= 0) return;
    lane.filling = true;
    const claimed = deps
      .claim(lane, room)
      .catch((err: unknown) => {
        // Not claimed again at once (that would spin on a failing database): the next poll or wake-up tries.
        lane.backlog = false;
        logger.error({ err, kind: lane.kind.name, lane: lane.name }, 'claiming jobs failed; the next poll tries again');
      })
      .finally(() => {
        claims.delete(claimed);
        lane.filling = false;
        pump(lane);
      });
    claims.add(claimed);
  }

  /** Starts, at once, what the lane holds and its admission and the kind's slots allow; sets a timer for a lane slowed down. */
  function startAdmitted(lane: Lane): void {
    const kind = lane.kind;
    while (lane.queue.length > 0) {
      const admission = admissionOf(lane);
      if (lane.inFlight >= admission.limit) return;
      if (kind.inFlight >= kind.kind.concurrency) return void kind.waiting.add(lane);
      const wait = admission.notBefore - clock.now();
      if (wait > 0) {
        lane.timer ??= clock.setTimeout(() => {
          lane.timer = null;
          pump(lane);
        }, wait);
        return;
      }
      lane.inFlight += 1;
      kind.inFlight += 1;
      deps.start(lane, lane.queue.shift()!);
    }
  }

  return {
    accepts(kind, laneName) {
      const admission = admissionOf({ kind, name: laneName });
      if (admission.notBefore > clock.now()) return false;
      const lane = lanes.get(laneKey(kind.name, laneName));
      if (lane === undefined) return true;
      // Older due jobs of the lane wait in the database: they go first.
      if (lane.backlog) return false;
      if (lane.queue.length + lane.inFlight >= admission.limit + admission.hold) {
        lane.backlog = true;
        return false;
      }
      return true;
    },
    enqueue(kind, held) {
      const enqueued = new Set<Lane>();
      for (const job of held) {
        const lane = laneOf(kind, job.job.lane);
        lane.queue.push(job);
        enqueued.add(lane);
      }
      for (const lane of enqueued) pump(lane);
    },
    markDue(kind, name) {
      const lane = laneOf(kind, name);
      lane.backlog = true;
      pump(lane);
    },
    attemptEnded(lane) {
      const kind = lane.kind;
      lane.inFlight -= 1;
      kind.inFlight -= 1;
      if (!deps.stopping()) {
        pump(lane);
        for (const waiting of [...kind.waiting]) {
          kind.waiting.delete(waiting);
          pump(waiting);
        }
      }
      dropIfIdle(lane);
    },
    take: (kind, name, limit) => lanes.get(laneKey(kind.name, name))?.queue.splice(0, limit).map(({ job }) => job) ?? [],
    claims,
    clear() {
      const unstarted = [...lanes.values()].flatMap((lane) => lane.queue.map(({ job }) => job));
      for (const lane of lanes.values()) lane.timer?.clear();
      lanes.clear();
      return unstarted;
    },
  };
}

/** A lane's jobs may run `limit` at once and a runner holds `hold` more of them in memory; a laned kind may slow a lane down. */
function admissionOf(lane: Pick<Lane, 'kind' | 'name'>): LaneAdmission {
  const { kind } = lane;
  if (kind.laned && lane.name !== null) return kind.kind.admit(lane.name);
  return { limit: kind.kind.concurrency, notBefore: 0, hold: 0 };
}
