/** A host's place in placement: `active` takes new machines, `draining` keeps its own and takes none, `lost` stopped answering. */
export const HOST_STATES = ['active', 'draining', 'lost'] as const;
export type HostState = (typeof HOST_STATES)[number];

export interface HostsTable {
  name: string;
  /** Its engine's address: `unix:///path`, `tcp://host:port` (TLS files per host) or `ssh://user@host`. */
  address: string;
  state: HostState;
  /** 1 once the operator drained it: a lost host that answers again returns to `draining`, not `active`. */
  drained: number;
  /** JSON object of the operator's labels. */
  labels: string;
  /** What its engine reported when added or last seen: CPUs and memory; disk where the engine says. */
  cpus: number;
  memory_bytes: number;
  disk_bytes: number | null;
  created_at: number;
  state_changed_at: number;
  /** Its engine's last answer (a ping, an event); null: never since it was added. */
  last_seen_at: number | null;
}

/**
 * A move's steps, each recorded before it is done: `waiting` (nothing done
 * yet), `copying` (the machine is held `stopping` on its old host while its
 * disk is copied to `to_host`), `committed` (the machine's record names
 * `to_host`; the old copy is being removed), then `done`, or `failed` with
 * the outcome saying why (the machine left where it was).
 */
export const MOVE_STEPS = ['waiting', 'copying', 'committed', 'done', 'failed'] as const;
export type MoveStep = (typeof MOVE_STEPS)[number];

/** One machine's move off a draining host (`npm run hosts -- drain <name> --move`). */
export interface MachineMovesTable {
  machine_id: string;
  from_host: string;
  /** Chosen as the copy begins; null while waiting. */
  to_host: string | null;
  step: MoveStep;
  /** The status the machine had when its move began, and since when: what it returns to afterwards. */
  prior_status: string | null;
  prior_status_changed_at: number | null;
  /** Why a move failed or what it did, in one line for the operator. */
  outcome: string | null;
  created_at: number;
  updated_at: number;
}
