import { CompiledQuery, type Kysely } from 'kysely';
import { dialectOf, type Database, type DialectName } from '../db/connect.ts';
import { inTransaction } from '../db/transaction.ts';
import { batchSelect, batchValues, cachedText, insertRows, joinsBatch, placeholders, type AnyRows, type Columns } from '../db/batch.ts';
import type { DB } from '../db/database.ts';
import { toIso, toIsoOrNull } from '../shared/clock.ts';
import { newId } from '../shared/ids.ts';
import type { DeliveriesTable, DeliveryAttemptsTable, DeliveryStatus } from './event-webhooks.tables.ts';

/**
 * Every statement on `deliveries`. A new field of the delivery record is a
 * column of DeliveriesTable (and its migration), a line in COLUMNS and in
 * newDeliveryRow, and, if the API shows it, a line in toDelivery and in DeliverySchema.
 */

/** The delivery record's columns, as the batched statements write them. */
const COLUMNS: Columns<DeliveriesTable> = [
  ['id', 'text'],
  ['account_id', 'text'],
  ['endpoint_id', 'text'],
  ['event_id', 'text'],
  ['event_type', 'text'],
  ['status', 'text'],
  ['attempts', 'integer'],
  ['next_attempt_at', 'bigint'],
  ['last_status', 'integer'],
  ['last_body', 'text'],
  ['last_error', 'text'],
  ['last_duration_ms', 'integer'],
  ['last_attempt_at', 'bigint'],
  ['created_at', 'bigint'],
  ['unqueued', 'integer'],
];

/** The delivery record as the API shows it. */
export interface Delivery {
  id: string;
  endpointId: string;
  eventId: string;
  eventType: string;
  status: DeliveryStatus;
  attempts: number;
  lastResponse: { status: number | null; body: string | null; error: string | null; durationMs: number | null; at: string } | null;
  nextAttemptAt: string | null;
  createdAt: string;
}

export function toDelivery(row: DeliveriesTable): Delivery {
  return {
    id: row.id,
    endpointId: row.endpoint_id,
    eventId: row.event_id,
    eventType: row.event_type,
    status: row.status,
    attempts: row.attempts,
    lastResponse:
      row.last_attempt_at === null
        ? null
        : { status: row.last_status, body: row.last_body, error: row.last_error, durationMs: row.last_duration_ms, at: toIso(row.last_attempt_at) },
    nextAttemptAt: toIsoOrNull(row.next_attempt_at),
    createdAt: toIso(row.created_at),
  };
}

/** The row builder: a delivery of an event to an endpoint, pending and due at once. */
export function newDeliveryRow(now: number, accountId: string, endpointId: string, event: { id: string; type: string }): DeliveriesTable {
  return {
    id: newId('dlv', now),
    account_id: accountId,
    endpoint_id: endpointId,
    event_id: event.id,
    event_type: event.type,
    status: 'pending',
    attempts: 0,
    next_attempt_at: now,
    last_status: null,
    last_body: null,
    last_error: null,
    last_duration_ms: null,
    last_attempt_at: null,
    created_at: now,
    unqueued: null,
  };
}

export async function insertDeliveries(db: Kysely<DB>, rows: readonly DeliveriesTable[]): Promise<void> {
  await insertRows(db, 'deliveries', COLUMNS, rows);
}

/** Deliveries' rows, for a write that stores them along with other rows (their event and jobs). */
export function deliveryRows(rows: readonly DeliveriesTable[]): AnyRows {
  return { table: 'deliveries', columns: COLUMNS, rows } as unknown as AnyRows;
}

/** What an attempt at a delivery needs: its event's type and the envelope exactly as stored. */
export interface DeliveryToSend {
  deliveryId: string;
  eventType: string;
  payload: string;
}

/** The deliveries behind claimed jobs, in the order asked; null where one is gone (its endpoint was deleted). */
export async function findDeliveriesToSend(db: Kysely<DB>, ids: readonly string[]): Promise<Array<DeliveryToSend | null>> {
  if (ids.length === 0) return [];
  const rows = await db
    .selectFrom('deliveries as d')
    .innerJoin('events as e', 'e.id', 'd.event_id')
    .select(['d.id', 'd.event_type', 'e.payload'])
    .where('d.id', 'in', ids)
    .where('d.status', '=', 'pending')
    .execute();
  const byId = new Map(rows.map((row) => [row.id, { deliveryId: row.id, eventType: row.event_type, payload: row.payload }]));
  return ids.map((id) => byId.get(id) ?? null);
}

/** One attempt's record on its delivery. */
export interface AttemptRecord {
  id: string;
  endpointId: string;
  ok: boolean;
  status: DeliveryStatus;
  nextAttemptAt: number | null;
  responseStatus: number | null;
  body: string | null;
  error: string | null;
  durationMs: number;
  at: number;
}

/** What an attempt changes on its delivery. */
const OUTCOME_COLUMNS = ['status', 'next_attempt_at', 'last_status', 'last_body', 'last_error', 'last_duration_ms', 'last_attempt_at'] as const satisfies ReadonlyArray<keyof DeliveriesTable>;

/** An attempt's columns as recordAttempts writes a batch of them: the delivery's key and endpoint, its outcome columns (as COLUMNS types them), then what only the attempt log keeps. */
const ATTEMPT_COLUMNS: Columns<AttemptRow> = [
  ...COLUMNS.filter(([name]) => name === 'id' || name === 'endpoint_id' || (OUTCOME_COLUMNS as ReadonlyArray<string>).includes(name)),
  ['ok', 'integer'],
] as Columns<AttemptRow>;

type AttemptRow = Pick<DeliveriesTable, 'id' | 'endpoint_id' | (typeof OUTCOME_COLUMNS)[number]> & { ok: number };

function attemptRow(a: AttemptRecord): AttemptRow {
  return {
    id: a.id,
    endpoint_id: a.endpointId,
    status: a.status,
    next_attempt_at: a.nextAttemptAt,
    last_status: a.responseStatus,
    last_body: a.body,
    last_error: a.error,
    last_duration_ms: a.durationMs,
    last_attempt_at: a.at,
    ok: a.ok ? 1 : 0,
  };
}

/** The statements of recordAttempts for a batch of `size`: one on PostgreSQL (whatever the size), two on SQLite. */
function attemptStatements(dialect: DialectName, size: number): string[] {
  const build = () => {
    const { select } = batchSelect(dialect, ATTEMPT_COLUMNS, size, placeholders(dialect));
    // The keys read from `v`, which PostgreSQL builds once (it is named twice), rather than from the parameter: one parse of the batch's JSON.
    const update = `update deliveries set ${OUTCOME_COLUMNS.map((name) => `${name} = v.${name}`).join(', ')}, attempts = deliveries.attempts + 1 from v where ${joinsBatch(dialect, 'deliveries', 'id', 'array(select id from v)')}`;
    // Each entry of the attempt log is numbered with its delivery's attempt count as just updated.
    const log = (updated: string) =>
      `insert into delivery_attempts (n, delivery_id, endpoint_id, at, ok, status, duration_ms, error, body) select d.attempts, v.id, v.endpoint_id, v.last_attempt_at, v.ok, v.last_status, v.last_duration_ms, v.last_error, v.last_body from v join ${updated} d on d.id = v.id`;
    return dialect === 'postgres'
      ? [`with v as (${select}), updated as (${update} returning deliveries.id, deliveries.attempts) ${log('updated')}`]
      : [`with v as (${select}) ${update}`, `with v as (${select}) ${log('deliveries')}`];
  };
  if (dialect === 'postgres') return [cachedText('attempts;postgres', () => build()[0]!)];
  const key = `attempts;sqlite;${size}`;
  return [cachedText(`${key};update`, () => build()[0]!), cachedText(`${key};log`, () => build()[1]!)];
}

/**
 * Records a batch of attempts: the outcome on each delivery (one more attempt
 * made) and an entry in its attempt log. On PostgreSQL one statement (the
 * update a data-modifying part of the log's insert); SQLite, whose
 * statements cost no round trip, runs the two in turn.
 */
export async function recordAttempts(db: Kysely<DB>, attempts: readonly AttemptRecord[]): Promise<void> {
  if (attempts.length === 0) return;
  const dialect = dialectOf(db);
  const parameters = batchValues(dialect, ATTEMPT_COLUMNS, attempts.map(attemptRow));
  for (const text of attemptStatements(dialect, attempts.length)) await db.executeQuery(CompiledQuery.raw(text, parameters));
}

/** One entry of a delivery's attempt log. */
export interface AttemptLogEntry {
  n: number;
  at: string;
  status: number | null;
  durationMs: number;
  error: string | null;
  body: string | null;
}

export async function findAttemptLog(db: Kysely<DB>, deliveryId: string): Promise<AttemptLogEntry[]> {
  const rows: DeliveryAttemptsTable[] = await db.selectFrom('delivery_attempts').selectAll().where('delivery_id', '=', deliveryId).orderBy('n').execute();
  return rows.map((row) => ({ n: row.n, at: toIso(Number(row.at)), status: row.status, durationMs: row.duration_ms, error: row.error, body: row.body }));
}


/**
 * An account's deliveries, newest first, all or one endpoint's. Every delivery
 * belongs to a current endpoint of its account (deleting one deletes its
 * deliveries), so the whole account is at most ten walks of the
 * (endpoint, id) index, each stopping at `limit`, merged: no scan of other
 * accounts' deliveries however many there are.
 */
export async function listDeliveryRows(
  db: Kysely<DB>,
  accountId: string,
  { endpointId, status, eventType, eventId }: DeliveryFilters,
  limit: number,
  before: string | undefined,
): Promise<DeliveriesTable[]> {
  const endpointIds =
    endpointId !== undefined
      ? [endpointId]
      : (await db.selectFrom('event_endpoints').select('id').where('account_id', '=', accountId).execute()).map((row) => row.id);
  if (endpointIds.length === 0) return [];
  const newestOf = (id: string) => {
    let query = db.selectFrom('deliveries').selectAll().where('endpoint_id', '=', id).where('account_id', '=', accountId);
    if (before !== undefined) query = query.where('id', '<', before);
    if (status !== undefined) query = query.where('status', '=', status);
    if (eventType !== undefined) query = query.where('event_type', '=', eventType);
    if (eventId !== undefined) query = query.where('event_id', '=', eventId);
    // Wrapped: SQLite allows ORDER BY and LIMIT only on a whole compound select, not on its parts.
    return db.selectFrom(query.orderBy('id', 'desc').limit(limit).as('newest')).selectAll();
  };
  if (endpointIds.length === 1) return newestOf(endpointIds[0]!).execute();
  const [first, ...rest] = endpointIds.map(newestOf);
  const merged = rest.reduce((union, next) => union.unionAll(next), first!);
  return db.selectFrom(merged.as('merged')).selectAll().orderBy('id', 'desc').limit(limit).execute();
}

export async function findDeliveryRow(db: Kysely<DB>, accountId: string, id: string): Promise<DeliveriesTable | undefined> {
  return db.selectFrom('deliveries').selectAll().where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
}

/** A finished delivery pending again, due now (its new attempt series is a new job). Undefined when it is still pending. */
export async function restartDelivery(db: Kysely<DB>, accountId: string, id: string, now: number): Promise<DeliveriesTable | undefined> {
  return db
    .updateTable('deliveries')
    .set({ status: 'pending', next_attempt_at: now })
    .where('id', '=', id)
    .where('account_id', '=', accountId)
    .where('status', '!=', 'pending')
    .returningAll()
    .executeTakeFirst();
}


/** Filters of the deliveries listing. */
export interface DeliveryFilters {
  endpointId?: string | undefined;
  status?: DeliveryStatus | undefined;
  eventType?: string | undefined;
  /** One event's deliveries (the dashboard's Events page). */
  eventId?: string | undefined;
}

/**
 * Failed deliveries of an endpoint created in [fromId, toId), after `after`,
 * at most `limit`, become pending and unqueued (the feeder hands them to the
 * lane). Answers how many, and the last id looked at (to go on from).
 */
export async function reopenFailed(
  db: Kysely<DB>,
  endpointId: string,
  fromId: string,
  toId: string,
  after: string | undefined,
  limit: number,
): Promise<{ count: number; last: string | undefined; more: boolean }> {
  let query = db.selectFrom('deliveries').select('id').where('endpoint_id', '=', endpointId).where('id', '>=', fromId).where('id', '<', toId).where('status', '=', 'failed');
  if (after !== undefined) query = query.where('id', '>', after);
  const ids = (await query.orderBy('id').limit(limit).execute()).map((row) => row.id);
  if (ids.length === 0) return { count: 0, last: undefined, more: false };
  const result = await db.updateTable('deliveries').set({ status: 'pending', next_attempt_at: null, unqueued: 1 }).where('id', 'in', ids).where('status', '=', 'failed').executeTakeFirst();
  return { count: Number(result.numUpdatedRows), last: ids.at(-1), more: ids.length === limit };
}

/** New deliveries, except where the event already has one to the endpoint: answers how many were added. */
export async function insertMissingDeliveries(db: Kysely<DB>, rows: readonly DeliveriesTable[]): Promise<number> {
  if (rows.length === 0) return 0;
  const result = await db
    .insertInto('deliveries')
    .values([...rows])
    .onConflict((oc) => oc.columns(['event_id', 'endpoint_id']).doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0n);
}

/** Of these events, those with a delivery to the endpoint. */
export async function eventsWithDelivery(db: Kysely<DB>, endpointId: string, eventIds: readonly string[]): Promise<Set<string>> {
  if (eventIds.length === 0) return new Set();
  const rows = await db.selectFrom('deliveries').select('event_id').where('event_id', 'in', eventIds).where('endpoint_id', '=', endpointId).execute();
  return new Set(rows.map((row) => row.event_id));
}

/**
 * Pending deliveries not yet handed to their lane (recovered or replayed),
 * oldest first, with what their attempts need; on PostgreSQL locked, skipping
 * those another feeder is handing over (SQLite's writers take turns anyway).
 */
export async function findUnqueued(db: Kysely<DB>, endpointId: string, limit: number): Promise<DeliveryToSend[]> {
  let query = db
    .selectFrom('deliveries as d')
    .innerJoin('events as e', 'e.id', 'd.event_id')
    .select(['d.id', 'd.event_type', 'e.payload'])
    .where('d.endpoint_id', '=', endpointId)
    .where('d.unqueued', '=', 1)
    .orderBy('d.id')
    .limit(limit);
  if (dialectOf(db) === 'postgres') query = query.forUpdate('d').skipLocked();
  const rows = await query.execute();
  return rows.map((row) => ({ deliveryId: row.id, eventType: row.event_type, payload: row.payload }));
}

/** Handed to the lane: due from now. */
export async function markQueued(db: Kysely<DB>, ids: readonly string[], now: number): Promise<void> {
  if (ids.length === 0) return;
  await db.updateTable('deliveries').set({ next_attempt_at: now, unqueued: null }).where('id', 'in', ids).where('unqueued', '=', 1).execute();
}

/** Whether the endpoint has a failed attempt in [from, to) (an index probe), and whether it has a successful one. */
export async function attemptsBetween(db: Kysely<DB>, endpointId: string, from: number, to: number, ok: boolean): Promise<boolean> {
  const row = await db
    .selectFrom('delivery_attempts')
    .select('at')
    .where('endpoint_id', '=', endpointId)
    .where('at', '>=', from)
    .where('at', '<', to)
    .where('ok', '=', ok ? 1 : 0)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/** Finished deliveries made before `before`, a batch for retention: their ids after `after`, in order. Pending ones are never taken. */
export async function finishedDeliveryIdsBefore(db: Kysely<DB>, before: string, after: string | undefined, limit: number): Promise<string[]> {
  let query = db.selectFrom('deliveries').select('id').where('id', '<', before).where('status', '!=', 'pending');
  if (after !== undefined) query = query.where('id', '>', after);
  return (await query.orderBy('id').limit(limit).execute()).map((row) => row.id);
}

/** Deletes these deliveries, if still finished, with their attempt logs; answers the rows deleted of each. */
export async function deleteFinishedDeliveries(database: Database, ids: readonly string[]): Promise<{ deliveries: number; attempts: number }> {
  if (ids.length === 0) return { deliveries: 0, attempts: 0 };
  return inTransaction(database, async (tx) => {
    const finished = (await tx.db.selectFrom('deliveries').select('id').where('id', 'in', ids).where('status', '!=', 'pending').execute()).map((row) => row.id);
    if (finished.length === 0) return { deliveries: 0, attempts: 0 };
    const attempts = await tx.db.deleteFrom('delivery_attempts').where('delivery_id', 'in', finished).executeTakeFirst();
    const deliveries = await tx.db.deleteFrom('deliveries').where('id', 'in', finished).where('status', '!=', 'pending').executeTakeFirst();
    return { deliveries: Number(deliveries.numDeletedRows), attempts: Number(attempts.numDeletedRows) };
  });
}
