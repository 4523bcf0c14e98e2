import { sql, type Kysely } from 'kysely';
import { Migrator, type Migration, type MigrationProvider } from 'kysely/migration';
import * as accounts from './migrations/0001_accounts.ts';
import * as eventWebhooks from './migrations/0002_event_webhooks.ts';
import * as machines from './migrations/0003_machines.ts';
import * as machineReliability from './migrations/0004_machine_reliability.ts';
import * as jobs from './migrations/0005_jobs.ts';
import * as billing from './migrations/0006_billing.ts';
import * as eventHistory from './migrations/0007_event_history.ts';
import * as oauth from './migrations/0008_oauth.ts';
import * as deliveriesInPlace from './migrations/0009_deliveries_in_place.ts';
import * as fewerKeyChecks from './migrations/0010_fewer_key_checks.ts';
import * as realRuns from './migrations/0011_real_runs.ts';
import * as screens from './migrations/0012_screens.ts';
import * as secondFactor from './migrations/0013_second_factor.ts';
import * as signingKeys from './migrations/0014_signing_keys.ts';
import * as eventsByMachine from './migrations/0015_events_by_machine.ts';
import * as billingUsageDays from './migrations/0016_billing_usage_days.ts';
import * as previews from './migrations/0017_previews.ts';
import * as machineEnvAndImages from './migrations/0018_machine_env_and_images.ts';
import * as templates from './migrations/0019_templates.ts';
import * as machineAutoStop from './migrations/0020_machine_auto_stop.ts';
import * as machineNetwork from './migrations/0021_machine_network.ts';
import * as laneAndAttemptLogKeys from './migrations/0022_lane_and_attempt_log_keys.ts';
import * as hosts from './migrations/0023_hosts.ts';
import * as machineMoves from './migrations/0024_machine_moves.ts';
import * as hostDrained from './migrations/0025_host_drained.ts';
import * as machineLostWithHost from './migrations/0026_machine_lost_with_host.ts';
import { dialectOf } from './connect.ts';
import type { DB } from './database.ts';

/** Listed here, not read from disk, so the set of migrations is fixed at build time. */
const migrations: Record<string, Migration> = {
  '0001_accounts': accounts,
  '0002_event_webhooks': eventWebhooks,
  '0003_machines': machines,
  '0004_machine_reliability': machineReliability,
  '0005_jobs': jobs,
  '0006_billing': billing,
  '0007_event_history': eventHistory,
  '0008_oauth': oauth,
  '0009_deliveries_in_place': deliveriesInPlace,
  '0010_fewer_key_checks': fewerKeyChecks,
  '0011_real_runs': realRuns,
  '0012_screens': screens,
  '0013_second_factor': secondFactor,
  '0014_signing_keys': signingKeys,
  '0015_events_by_machine': eventsByMachine,
  '0016_billing_usage_days': billingUsageDays,
  '0017_previews': previews,
  '0018_machine_env_and_images': machineEnvAndImages,
  '0019_templates': templates,
  '0020_machine_auto_stop': machineAutoStop,
  '0021_machine_network': machineNetwork,
  '0022_lane_and_attempt_log_keys': laneAndAttemptLogKeys,
  '0023_hosts': hosts,
  '0024_machine_moves': machineMoves,
  '0025_host_drained': hostDrained,
  '0026_machine_lost_with_host': machineLostWithHost,
};

const provider: MigrationProvider = { getMigrations: async () => migrations };

/**
 * Brings the schema up to date; safe to run from several processes at once.
 * @throws the first migration error.
 */
export async function migrateToLatest(db: Kysely<DB>): Promise<void> {
  const { error } = await new Migrator({ db, provider, ...(await migrationTableSchema(db)) }).migrateToLatest();
  if (error) throw error;
}

/**
 * Brings the schema up to the named migration, no further (tests of what a
 * migration does to the rows it finds).
 * @throws the first migration error.
 */
export async function migrateTo(db: Kysely<DB>, name: string): Promise<void> {
  const { error } = await new Migrator({ db, provider, ...(await migrationTableSchema(db)) }).migrateTo(name);
  if (error) throw error;
}

/**
 * Postgres: the schema we work in, named explicitly. Without it Kysely's
 * Migrator looks for its own tables in every schema of the database, takes
 * another schema's for ours, skips creating them and then fails
 * ("relation kysely_migration_lock does not exist") whenever several
 * schemas share a database, as test runs do.
 */
async function migrationTableSchema(db: Kysely<DB>): Promise<{ migrationTableSchema?: string }> {
  if (dialectOf(db) !== 'postgres') return {};
  const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(db);
  const schema = rows[0]?.schema;
  return schema ? { migrationTableSchema: schema } : {};
}
