import { CompiledQuery, sql, type Kysely } from 'kysely';
import { dialectOf } from '../db/connect.ts';
import type { DB } from '../db/database.ts';
import { prepared, preferPrepared } from '../db/prepared.ts';
import { toIso, toIsoOrNull } from '../shared/clock.ts';
import type { DeliveriesTable, DeliveryStatus } from './event-webhooks.tables.ts';

/** Spec 2.5 / CONTRACT 6: the delivery record as the API shows it. */
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

/** A delivery this worker holds the lease of, with what it needs to send it. */
export interface LeasedDelivery {
  id: string;
  eventId: string;
  eventType: string;
  payload: string;
  attempts: number;
  seriesAttempts: number;
  leaseUntil: number;
}

export interface Outcome {
  id: string;
  status: DeliveryStatus;
  responseStatus: number | null;
  body: string | null;
  error: string | null;
  durationMs: number;
  at: number;
  nextAttemptAt: number | null;
}

const PENDING = sql.lit('pending');

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

/** A new delivery: pending, due at its creation, leased or not. */
const insertNewDeliveryQuery = prepared(
  8,
  (db, id: string, accountId: string, endpointId: string, eventId: string, eventType: string, createdAt: number, lockedBy: string | null, lockedUntil: number | null) =>
    db.insertInto('deliveries').values({
      id,
      account_id: accountId,
      endpoint_id: endpointId,
      event_id: eventId,
      event_type: eventType,
      status: 'pending' as const,
      attempts: 0,
      series_attempts: 0,
      next_attempt_at: createdAt,
      locked_by: lockedBy,
      locked_until: lockedUntil,
      created_at: createdAt,
    }),
);

/**
 * New deliveries, one prepared statement each: SQLite runs a multi-row VALUES
 * several times slower. (PostgreSQL's emit inserts its deliveries along with
 * the event: see insertEventWithDeliveries.)
 */
export async function insertDeliveries(db: Kysely<DB>, rows: DeliveriesTable[]): Promise<void> {
  for (const row of rows) {
    await insertNewDeliveryQuery.execute(db, row.id, row.account_id, row.endpoint_id, row.event_id, row.event_type, row.created_at, row.locked_by, row.locked_until);
  }
}

/** A delivery written whole, in whatever state it starts. */
export async function insertDeliveryRow(db: Kysely<DB>, row: DeliveriesTable): Promise<void> {
  await db.insertInto('deliveries').values(row).execute();
}

/** Enabled endpoints that have deliveries due and not leased: where a worker has work. */
export async function endpointsWithDueDeliveries(db: Kysely<DB>, now: number): Promise<string[]> {
  const rows = await db
    .selectFrom('event_endpoints as e')
    .select('e.id')
    .where('e.enabled', '=', 1)
    .where(({ exists, selectFrom }) =>
      exists(
        selectFrom('deliveries as d')
          .select(sql.lit(1).as('one'))
          .whereRef('d.endpoint_id', '=', 'e.id')
          .where(sql.ref('d.status'), '=', PENDING)
          .where('d.next_attempt_at', '<=', now)
          .where((eb) => eb.or([eb('d.locked_until', 'is', null), eb('d.locked_until', '<', now)])),
      ),
    )
    .execute();
  return rows.map((row) => row.id);
}

/**
 * The ids of up to `limit` deliveries of one endpoint that are due and leased
 * to no one, oldest first: what a worker may take. On PostgreSQL rows another
 * worker is taking are skipped (`FOR UPDATE SKIP LOCKED`); SQLite runs one
 * writer at a time, so the statement is enough there.
 */
function dueDeliveriesOf(db: Kysely<DB>, endpointId: string, now: number, limit: number) {
  const due = db
    .selectFrom('deliveries')
    .select('id')
    .where('endpoint_id', '=', endpointId)
    .where(sql.ref('status'), '=', PENDING)
    .where('next_attempt_at', '<=', now)
    .where((eb) => eb.or([eb('locked_until', 'is', null), eb('locked_until', '<', now)]))
    .orderBy('next_attempt_at')
    .orderBy('id')
    .limit(limit);
  return dialectOf(db) === 'postgres' ? due.forUpdate().skipLocked() : due;
}

/** Leases up to `limit` due deliveries of one endpoint (see dueDeliveriesOf). */
export async function claimDueDeliveries(
  db: Kysely<DB>,
  endpointId: string,
  workerId: string,
  now: number,
  leaseUntil: number,
  limit: number,
): Promise<LeasedDelivery[]> {
  const claimed = await db
    .updateTable('deliveries')
    .set({ locked_by: workerId, locked_until: leaseUntil })
    .where('id', 'in', dueDeliveriesOf(db, endpointId, now, limit))
    .returning(['id', 'event_id', 'event_type', 'attempts', 'series_attempts'])
    .execute();
  if (claimed.length === 0) return [];
  const payloads = await db
    .selectFrom('events')
    .select(['id', 'payload'])
    .where('id', 'in', claimed.map((row) => row.event_id))
    .execute();
  const payloadOf = new Map(payloads.map((row) => [row.id, row.payload]));
  return claimed
    .sort((a, b) => (a.id < b.id ? -1 : 1))
    .map((row) => ({
      id: row.id,
      eventId: row.event_id,
      eventType: row.event_type,
      payload: payloadOf.get(row.event_id)!,
      attempts: row.attempts,
      seriesAttempts: row.series_attempts,
      leaseUntil,
    }));
}

/**
 * A failed attempt for up to `limit` due, unleased deliveries of one endpoint,
 * made without a connection (the endpoint is failing: see the worker's
 * probing). Each moves along its own schedule exactly as if it had been sent,
 * to `failed` after its last attempt; `error` says it was not sent. Answers
 * how many were touched and how many of those are now failed.
 */
export async function failDueWithoutSending(
  db: Kysely<DB>,
  endpointId: string,
  now: number,
  schedule: { retryDelaysMs: readonly number[]; maxAttempts: number },
  error: string,
  limit: number,
): Promise<{ touched: number; failed: number }> {
  // retryDelay() in SQL: after the n-th failed attempt (n = series_attempts + 1) wait delays[n - 1], the last repeating.
  // The numbers come from configuration and the clock, so they are written as literals (PostgreSQL cannot type `$1 + $2`).
  const delays = schedule.retryDelaysMs;
  const delay =
    delays.length === 1
      ? sql.lit(delays[0]!)
      : sql`case series_attempts ${sql.join(delays.slice(0, -1).map((ms, i) => sql`when ${sql.lit(i)} then ${sql.lit(ms)}`), sql` `)} else ${sql.lit(delays.at(-1)!)} end`;
  const last = sql`series_attempts + 1 >= ${sql.lit(schedule.maxAttempts)}`;
  const rows = await db
    .updateTable('deliveries')
    .set({
      status: sql<DeliveryStatus>`case when ${last} then ${sql.lit('failed')} else ${sql.lit('pending')} end`,
      attempts: sql<number>`attempts + 1`,
      series_attempts: sql<number>`series_attempts + 1`,
      next_attempt_at: sql<number | null>`case when ${last} then null else ${sql.lit(now)} + ${delay} end`,
      locked_by: null,
      locked_until: null,
      last_status: null,
      last_body: null,
      last_error: error,
      last_duration_ms: 0,
      last_attempt_at: now,
    })
    .where('id', 'in', dueDeliveriesOf(db, endpointId, now, limit))
    .returning('status')
    .execute();
  return { touched: rows.length, failed: rows.filter((row) => row.status === 'failed').length };
}

/** Extends a lease this worker still holds; false when it was lost. */
export async function extendLease(db: Kysely<DB>, id: string, workerId: string, leaseUntil: number): Promise<boolean> {
  const result = await db
    .updateTable('deliveries')
    .set({ locked_until: leaseUntil })
    .where('id', '=', id)
    .where('locked_by', '=', workerId)
    .where(sql.ref('status'), '=', PENDING)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** Gives deliveries back to the queue, for any worker to take. */
export async function releaseLeases(db: Kysely<DB>, ids: string[], workerId: string): Promise<void> {
  if (ids.length === 0) return;
  await db
    .updateTable('deliveries')
    .set({ locked_by: null, locked_until: null })
    .where('id', 'in', ids)
    .where('locked_by', '=', workerId)
    .execute();
}

const OUTCOME_COLUMNS = ['id', 'status', 'next_attempt_at', 'last_status', 'last_body', 'last_error', 'last_duration_ms', 'last_attempt_at'] as const;
/** PostgreSQL types the parameters of a VALUES list as text unless told; SQLite takes them as they come. */
const OUTCOME_TYPES = ['text', 'text', 'bigint', 'integer', 'text', 'text', 'integer', 'bigint'] as const;
const OUTCOMES_PER_STATEMENT = 200;
const outcomeStatements = new Map<string, string>();

/**
 * `UPDATE … FROM (VALUES …)` for `count` outcomes, which both engines run.
 * VALUES columns are `column1`, `column2`… on both, hence the renaming select.
 * Written as text and kept per size: a batch has up to 1,600 parameters, and
 * building it through the query builder each time costs more than running it.
 */
function outcomeStatement(dialect: 'sqlite' | 'postgres', count: number): string {
  const key = `${dialect}:${count}`;
  let text = outcomeStatements.get(key);
  if (text !== undefined) return text;
  let parameter = 0;
  const next = (type: string) => (dialect === 'postgres' ? `$${++parameter}::${type}` : '?');
  const rows = Array.from({ length: count }, () => `(${OUTCOME_TYPES.map(next).join(', ')})`);
  const named = OUTCOME_COLUMNS.map((column, i) => `column${i + 1} as ${column}`).join(', ');
  text = `update deliveries set
      status = v.status,
      attempts = deliveries.attempts + 1,
      series_attempts = deliveries.series_attempts + 1,
      next_attempt_at = v.next_attempt_at,
      locked_by = null,
      locked_until = null,
      last_status = v.last_status,
      last_body = v.last_body,
      last_error = v.last_error,
      last_duration_ms = v.last_duration_ms,
      last_attempt_at = v.last_attempt_at
    from (select ${named} from (values ${rows.join(', ')}) as outcome) as v
    where deliveries.id = v.id and deliveries.locked_by = ${next('text')}`;
  outcomeStatements.set(key, text);
  if (dialect === 'postgres') preferPrepared(text);
  return text;
}

/** Records attempt outcomes, a whole batch per statement, only for rows this worker still holds. */
export async function recordOutcomes(db: Kysely<DB>, workerId: string, outcomes: readonly Outcome[]): Promise<void> {
  const dialect = dialectOf(db);
  for (let offset = 0; offset < outcomes.length; offset += OUTCOMES_PER_STATEMENT) {
    const batch = outcomes.slice(offset, offset + OUTCOMES_PER_STATEMENT);
    const parameters = batch.flatMap((o) => [o.id, o.status, o.nextAttemptAt, o.responseStatus, o.body, o.error, o.durationMs, o.at]);
    parameters.push(workerId);
    await db.executeQuery(CompiledQuery.raw(outcomeStatement(dialect, batch.length), parameters));
  }
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
  endpointId: string | undefined,
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

/** A new attempt series for a finished delivery: same dlv_ and evt_, due now. Undefined when it is still pending. */
export async function restartDelivery(db: Kysely<DB>, accountId: string, id: string, now: number): Promise<DeliveriesTable | undefined> {
  return db
    .updateTable('deliveries')
    .set({ status: 'pending', series_attempts: 0, next_attempt_at: now, locked_by: null, locked_until: null })
    .where('id', '=', id)
    .where('account_id', '=', accountId)
    .where('status', '!=', 'pending')
    .returningAll()
    .executeTakeFirst();
}

export async function countPendingDeliveries(db: Kysely<DB>): Promise<number> {
  const row = await db
    .selectFrom('deliveries')
    .select((eb) => eb.fn.countAll<number | string>().as('count'))
    .where(sql.ref('status'), '=', PENDING)
    .executeTakeFirstOrThrow();
  return Number(row.count);
}
