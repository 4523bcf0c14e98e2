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
