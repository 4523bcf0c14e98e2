import type { Kysely } from 'kysely';

/**
 * Passwordless passkey sign-in keeps nothing per request (issue 38): its
 * challenge rides in a cookie signed with a key of `signing_keys` (made on
 * first use, by whichever process needs it first, and read by every other),
 * and only a sign-in that succeeds records its challenge in
 * `spent_challenges` (SHA-256), in the transaction of its session, so the
 * same answer never signs in twice. Spent challenges go once the cookie they
 * came in has expired.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('signing_keys')
    .addColumn('name', 'text', (col) => col.primaryKey())
    .addColumn('secret', 'text', (col) => col.notNull())
    .addColumn('created_at', 'bigint', (col) => col.notNull())
    .execute();

  await db.schema
    .createTable('spent_challenges')
    .addColumn('challenge_hash', 'text', (col) => col.primaryKey())
    .addColumn('expires_at', 'bigint', (col) => col.notNull())
    .execute();
  await db.schema.createIndex('spent_challenges_expires_at').on('spent_challenges').column('expires_at').execute();
}
