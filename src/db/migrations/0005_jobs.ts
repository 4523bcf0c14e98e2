import { sql, type Kysely } from 'kysely';

/**
 * One queue for all background work (src/jobs/). The leases and retry
 * columns that deliveries, machines, schedules, pools and runs each kept
 * become jobs; what was pending is carried over so no work is lost on upgrade.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('job_lanes')
    .addColumn('lane', 'text', (col) => col.primaryKey())
    .addColumn('paused', 'integer', (col) => col.notNull())
    .execute();

  await db.schema
    .createTable('jobs')
    .addColumn('id', 'text', (col) => col.primaryKey())
    .addColumn('kind', 'text', (col) => col.notNull())
    .addColumn('lane', 'text', (col) => col.references('job_lanes.lane').onDelete('cascade'))
    .addColumn('key', 'text')
    .addColumn('payload', 'text', (col) => col.notNull())
    .addColumn('run_at', 'bigint', (col) => col.notNull())
    .addColumn('attempts', 'integer', (col) => col.notNull())
    .addColumn('locked_by', 'text')
    .addColumn('locked_until', 'bigint')
    .addColumn('last_error', 'text')
    .addColumn('created_at', 'bigint', (col) => col.notNull())
    .execute();
  await db.schema.createIndex('jobs_key').on('jobs').column('key').unique().where(sql.ref('key'), 'is not', null).execute();
  await db.schema.createIndex('jobs_lane_due').on('jobs').columns(['lane', 'run_at', 'id']).where(sql.ref('lane'), 'is not', null).execute();
  await db.schema.createIndex('jobs_due').on('jobs').columns(['kind', 'run_at', 'id']).where(sql.ref('lane'), 'is', null).execute();

  await carryOverPendingWork(db);

  // What the jobs now hold.
  await db.schema.dropIndex('deliveries_due').execute();
  for (const column of ['series_attempts', 'locked_by', 'locked_until']) await db.schema.alterTable('deliveries').dropColumn(column).execute();
  await db.schema.dropIndex('machines_check_due').execute();
  await db.schema.dropIndex('machines_expiry_due').execute();
  for (const column of ['check_at', 'failures', 'retry_at']) await db.schema.alterTable('machines').dropColumn(column).execute();
  await db.schema.dropIndex('schedules_due').execute();
  await db.schema.alterTable('schedules').dropColumn('failures').execute();
  for (const column of ['failures', 'retry_at']) await db.schema.alterTable('pools').dropColumn(column).execute();
  await db.schema.dropIndex('runs_running_lease').execute();
  for (const column of ['owner', 'lease_until']) await db.schema.alterTable('runs').dropColumn(column).execute();
}

/** Ids of carried-over jobs: a delivery's job has the delivery's id; the others `job_` and the body of their subject's id. */
async function carryOverPendingWork(db: Kysely<unknown>): Promise<void> {
  const now = Date.now();
  await sql`insert into job_lanes (lane, paused) select id, 1 - enabled from event_endpoints`.execute(db);
  await sql`insert into jobs (id, kind, lane, key, payload, run_at, attempts, created_at)
    select id, 'webhook.delivery', endpoint_id, null, '{}',
      coalesce(next_attempt_at, ${now}), series_attempts, created_at
    from deliveries where status = 'pending'`.execute(db);
  await sql`insert into jobs (id, kind, lane, key, payload, run_at, attempts, created_at)
    select 'job_c' || substr(id, 5), 'machine.check', null, 'machine.check:' || id, '{"machineId":"' || id || '"}', check_at, failures, ${now}
    from machines where check_at is not null`.execute(db);
  await sql`insert into jobs (id, kind, lane, key, payload, run_at, attempts, created_at)
    select 'job_e' || substr(id, 5), 'machine.expire', null, 'machine.expire:' || id, '{"machineId":"' || id || '"}',
      coalesce(retry_at, expires_at), failures, ${now}
    from machines where expires_at is not null and expired_at is null and status <> 'destroyed'`.execute(db);
  await sql`insert into jobs (id, kind, lane, key, payload, run_at, attempts, created_at)
    select 'job_' || substr(id, 5), 'schedule.tick', null, 'schedule.tick:' || id, '{"scheduleId":"' || id || '"}', next_run_at, failures, ${now}
    from schedules`.execute(db);
  await sql`insert into jobs (id, kind, lane, key, payload, run_at, attempts, created_at)
    select 'job_' || substr(id, 6), 'pool.refill', null, 'pool.refill:' || id, '{"poolId":"' || id || '"}', coalesce(retry_at, ${now}), failures, ${now}
    from pools`.execute(db);
  // Pending runs execute once their machine runs; running ones whose process is gone are failed as interrupted.
  await sql`insert into jobs (id, kind, lane, key, payload, run_at, attempts, created_at)
    select 'job_' || substr(id, 5), 'run.execute', null, 'run.execute:' || id, '{"runId":"' || id || '"}',
      case when status = 'running' then coalesce(lease_until, ${now}) else ${now} end, 0, created_at
    from runs where status = 'running' or (status = 'pending' and machine_id in (select id from machines where status = 'running'))`.execute(db);
}
