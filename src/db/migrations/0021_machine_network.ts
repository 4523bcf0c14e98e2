import type { Kysely } from 'kysely';

/**
 * A machine's network policy (issue 41) as JSON
 * (`{"internet":…,"allow":[…],"deny":[…]}`); null when none was given: the
 * operator's default (MACHINE_EGRESS).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('machines').addColumn('network', 'text').execute();
}
