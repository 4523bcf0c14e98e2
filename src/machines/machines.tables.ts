import type { MachineStatus } from '../providers/provider.ts';

// A machine's states are the provider seam's too (a host reports them): defined there, the lowest room.
export { MACHINE_STATUSES, type MachineStatus } from '../providers/provider.ts';

/** What a `stopping` machine is on its way to; recorded before the host is asked. `move`: held by its move to another host (moves.service.ts). */
export type PendingAction = 'stop' | 'destroy' | 'move';

export type OnExpire = 'stop' | 'destroy';

export interface MachinesTable {
  id: string;
  account_id: string;
  name: string;
  size: string;
  /** Caller-supplied reference; the empty string when none was given. */
  external_id: string;
  /** JSON object of string keys to string values. */
  labels: string;
  status: MachineStatus;
  status_changed_at: number;
  /** Bumped by every change: state changes are compare-and-set on it, so two processes never apply one twice. */
  version: number;
  /** First completed boot: the moment `machine.created` was emitted. */
  booted_at: number | null;
  /** The warm pool this machine waits in; null once claimed, or when it never was in one. */
  pool_id: string | null;
  /** The host it is placed on (hosts.name); `local` for a machine from before hosts. */
  host: string | null;
  /** 1 while its record waits for its lost host to answer: in error since the host was lost, or destroyed meanwhile (its container still there). */
  lost_with_host: number;
  on_expire: OnExpire;
  expires_at: number | null;
  /** Set when expiry was handled, so it happens once. */
  expired_at: number | null;
  /** SHA-256 of the current machine token; null when the machine has none (pooled or destroyed). */
  mcp_token_hash: string | null;
  /** Set with status `stopping`: the stop or destroy the host is being asked for, and the reason its event will carry. */
  pending_action: PendingAction | null;
  pending_reason: string | null;
  /** The screen chosen at create; null: DEFAULT_SCREEN. */
  screen_width: number | null;
  screen_height: number | null;
  /** JSON array of the names of the machine's environment, in clear: answers show them. */
  env_names: string;
  /** The environment's names and values, sealed (shared/sealing.ts); null when it has none. */
  env_sealed: string | null;
  /** Its network policy as JSON (network-policy.ts); null: the operator's default (MACHINE_EGRESS). */
  network: string | null;
  /** The name of its image among the operator's (MACHINE_IMAGES); `default`: MACHINE_IMAGE. */
  image: string;
  /** Idle stop: stopped after this many minutes without activity; 0: never. */
  auto_stop_minutes: number;
  /** The last activity recorded (activity.ts says what counts), written at most every few seconds; null: none yet. */
  last_active_at: number | null;
  /** The template it was made from (issue 41); null for a machine made from an image. */
  template_id: string | null;
  created_at: number;
  updated_at: number;
}

export interface PoolsTable {
  id: string;
  account_id: string;
  name: string;
  size: string;
  /** Machines kept booted and unclaimed. */
  count: number;
  /** The template its machines are made from; null: the base image. A template a pool names cannot be deleted. */
  template_id: string | null;
  /** Bumped by every refill: refills are serialised on it across processes. */
  version: number;
  created_at: number;
  updated_at: number;
}

export interface LiveViewsTable {
  token_hash: string;
  account_id: string;
  machine_id: string;
  expires_at: number;
  created_at: number;
}

/** A machine's disk saved under a name (issue 41); the disk itself is the host's (an image, with Docker). */
export interface TemplatesTable {
  id: string;
  account_id: string;
  name: string;
  source_machine_id: string;
  /** The source machine's image name (MACHINE_IMAGES), which its machines show. */
  image: string;
  size_bytes: number;
  /** The source machine's environment, carried by its disk: names in clear, the whole sealed (as machines keep theirs). */
  env_names: string;
  env_sealed: string | null;
  /** The host whose engine holds its disk (the source machine's); its machines are placed there when it has room (elsewhere its image is copied first). */
  host: string | null;
  created_at: number;
}
