import { sql, type Kysely, type Updateable } from 'kysely';
import type { DB } from '../db/database.ts';
import { toIso, toIsoOrNull } from '../shared/clock.ts';
import type { MachinesTable, MachineStatus } from './machines.tables.ts';
import type { ProviderMachine } from '../providers/provider.ts';
import type { NetworkPolicy } from '../providers/network-policy.ts';
import { DEFAULT_SCREEN, type ScreenSize } from '../providers/screen-size.ts';

export type MachineRow = MachinesTable;

/** The labels column holds a JSON object of strings (checked by the schemas on the way in). */
export function parseLabels(json: string): Record<string, string> {
  return JSON.parse(json) as Record<string, string>;
}

/** The machine record of the HTTP API. */
export interface MachineView {
  id: string;
  name: string;
  status: MachineStatus;
  size: string;
  externalId: string;
  labels: Record<string, string>;
  expiresAt: string | null;
  screen: ScreenSize;
  /** The names of its environment; the values never leave. */
  envNames: string[];
  /** The name of its image (`default`: the service's base image). */
  image: string;
  /** Idle stop: minutes without activity before it is stopped (reason `idle`); 0: never. */
  autoStopMinutes: number;
  /** Its network policy; null: the operator's default (MACHINE_EGRESS). */
  network: NetworkPolicy | null;
  /** The template it was made from (tpl_…), or null. */
  template: string | null;
  createdAt: string;
}

export function toMachineView(row: MachineRow): MachineView {
  return {
    id: row.id,
    name: row.name,
    status: row.status,
    size: row.size,
    externalId: row.external_id,
    labels: parseLabels(row.labels),
    expiresAt: toIsoOrNull(row.expires_at),
    screen: screenOf(row),
    envNames: JSON.parse(row.env_names) as string[],
    image: row.image,
    autoStopMinutes: row.auto_stop_minutes,
    network: networkOf(row),
    template: row.template_id,
    createdAt: toIso(row.created_at),
  };
}

/** The policy it was given; null: the operator's default. */
export function networkOf(row: Pick<MachineRow, 'network'>): NetworkPolicy | null {
  return row.network === null ? null : (JSON.parse(row.network) as NetworkPolicy);
}

export function screenOf(row: Pick<MachineRow, 'screen_width' | 'screen_height'>): ScreenSize {
  return row.screen_width !== null && row.screen_height !== null ? { width: row.screen_width, height: row.screen_height } : DEFAULT_SCREEN;
}

export function toProviderMachine(row: MachineRow): ProviderMachine {
  return { id: row.id, name: row.name, size: row.size, labels: parseLabels(row.labels), status: row.status, statusChangedAt: row.status_changed_at, screen: screenOf(row), sealedEnv: row.env_sealed, image: row.image, network: networkOf(row), template: row.template_id };
}

/** Statuses in which a pooled machine counts as warm. */
export const WARM_STATUSES: MachineStatus[] = ['starting', 'running'];

export async function insertMachine(db: Kysely<DB>, row: MachineRow): Promise<void> {
  await db.insertInto('machines').values(row).execute();
}

export async function findMachine(db: Kysely<DB>, accountId: string, id: string): Promise<MachineRow | undefined> {
  return db.selectFrom('machines').selectAll().where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
}

export async function findMachineById(db: Kysely<DB>, id: string): Promise<MachineRow | undefined> {
  return db.selectFrom('machines').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function findMachineByTokenHash(db: Kysely<DB>, tokenHash: string) {
  return db
    .selectFrom('machines')
    .select(['id', 'account_id'])
    .where('mcp_token_hash', '=', tokenHash)
    .where('status', '<>', 'destroyed')
    .executeTakeFirst();
}

export async function listMachineRows(
  db: Kysely<DB>,
  accountId: string,
  options: { limit: number; before: string | undefined; status: MachineStatus | undefined },
): Promise<MachineRow[]> {
  let query = db.selectFrom('machines').selectAll().where('account_id', '=', accountId);
  if (options.before !== undefined) query = query.where('id', '<', options.before);
  if (options.status !== undefined) query = query.where('status', '=', options.status);
  return query.orderBy('id', 'desc').limit(options.limit).execute();
}

/**
 * What else must hold for an idle stop to apply: recorded activity does not
 * bump the version (it would make every stop or claim lose its race to a
 * terminal's keystrokes), so the stop's compare-and-set also checks that no
 * activity came after `idleSince` and that no run is unfinished.
 */
export interface IdleGuard {
  idleSince: number;
}

/**
 * Compare-and-set: applies `changes` only if the machine is still at the
 * version read (and, with `idle`, still idle), and bumps it. False means
 * someone else changed it first.
 */
export async function updateMachineIf(
  db: Kysely<DB>,
  row: Pick<MachineRow, 'id' | 'version'>,
  changes: Updateable<MachinesTable>,
  now: number,
  idle?: IdleGuard,
): Promise<boolean> {
  let query = db
    .updateTable('machines')
    .set({ ...changes, version: row.version + 1, updated_at: now })
    .where('id', '=', row.id)
    .where('version', '=', row.version);
  if (idle !== undefined) {
    query = query
      .where((eb) => eb.or([eb('last_active_at', 'is', null), eb('last_active_at', '<=', idle.idleSince)]))
      .where((eb) => eb.not(eb.exists(unfinishedRuns(db, row.id))));
  }
  const result = await query.executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** The machine's runs that are pending or running (through the partial index `runs_unfinished`, whose predicate this repeats). */
function unfinishedRuns(db: Kysely<DB>, machineId: string) {
  return db.selectFrom('runs').select(sql.lit(1).as('one')).where('runs.machine_id', '=', machineId).where(sql<boolean>`runs.status in ('pending', 'running')`);
}

/** Whether a run of the machine is pending or running: a busy machine is never idle. */
export async function hasUnfinishedRun(db: Kysely<DB>, machineId: string): Promise<boolean> {
  return (await unfinishedRuns(db, machineId).limit(1).executeTakeFirst()) !== undefined;
}

/**
 * Records activity at `at` (never moving it back), without bumping the
 * version: it changes no state, so no compare-and-set of a state change may
 * lose to it.
 */
export async function recordActivity(db: Kysely<DB>, machineId: string, at: number): Promise<void> {
  await db
    .updateTable('machines')
    .set({ last_active_at: at })
    .where('id', '=', machineId)
    .where((eb) => eb.or([eb('last_active_at', 'is', null), eb('last_active_at', '<', at)]))
    .execute();
}

/** A machine's settings that may change while it exists (PATCH), without a change of state: a compare-and-set like any other. */
export async function updateMachineSettings(db: Kysely<DB>, row: MachineRow, changes: Updateable<MachinesTable>, now: number): Promise<MachineRow | null> {
  if (!(await updateMachineIf(db, row, changes, now))) return null;
  return { ...row, ...changes, version: row.version + 1, updated_at: now } as MachineRow;
}

/** Warm machines of a pool, running ones first: those are the ones worth handing out. */
export async function warmPoolMachines(db: Kysely<DB>, poolId: string, limit: number): Promise<MachineRow[]> {
  return db
    .selectFrom('machines')
    .selectAll()
    .where('pool_id', '=', poolId)
    .where('status', 'in', WARM_STATUSES)
    .orderBy((eb) => eb.case().when('status', '=', 'running').then(0).else(1).end())
    .orderBy('id')
    .limit(limit)
    .execute();
}

/** The account's machines that are booting, running or paused (pooled ones included): what an empty balance stops. */
export async function activeMachinesOf(db: Kysely<DB>, accountId: string): Promise<MachineRow[]> {
  return db.selectFrom('machines').selectAll().where('account_id', '=', accountId).where('status', 'in', ['starting', 'running', 'paused']).orderBy('id').execute();
}
