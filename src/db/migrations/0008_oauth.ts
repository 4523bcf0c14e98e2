import { sql, type Kysely } from 'kysely';

/**
 * OAuth 2.1 for the platform MCP endpoint (src/oauth/). `oauth_records` is the
 * storage of the authorization server (oidc-provider's adapter): one row per
 * model instance (client, interaction, session, grant, code, access and
 * refresh token), keyed by the SHA-256 of its id, so a token is never stored
 * in the clear. `oauth_grants` is ours: one consent of one account to one
 * client, as the dashboard lists it; a token works only while its grant's row is here.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('oauth_records')
    .addColumn('kind', 'text', (col) => col.notNull())
    .addColumn('id_hash', 'text', (col) => col.notNull())
    .addColumn('payload', 'text', (col) => col.notNull())
    .addColumn('grant_id', 'text')
    .addColumn('uid', 'text')
    .addColumn('expires_at', 'bigint')
    .addColumn('consumed_at', 'bigint')
    .addPrimaryKeyConstraint('oauth_records_pk', ['kind', 'id_hash'])
    .execute();
  await db.schema.createIndex('oauth_records_grant').on('oauth_records').column('grant_id').where(sql.ref('grant_id'), 'is not', null).execute();
  await db.schema.createIndex('oauth_records_uid').on('oauth_records').columns(['kind', 'uid']).where(sql.ref('uid'), 'is not', null).execute();
  await db.schema.createIndex('oauth_records_expiry').on('oauth_records').column('expires_at').where(sql.ref('expires_at'), 'is not', null).execute();

  await db.schema
    .createTable('oauth_grants')
    .addColumn('id', 'text', (col) => col.primaryKey())
    .addColumn('account_id', 'text', (col) => col.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('client_id', 'text', (col) => col.notNull())
    .addColumn('client_name', 'text', (col) => col.notNull())
    .addColumn('redirect_host', 'text', (col) => col.notNull())
    .addColumn('created_at', 'bigint', (col) => col.notNull())
    .addColumn('last_used_at', 'bigint')
    .addColumn('expires_at', 'bigint', (col) => col.notNull())
    .execute();
  await db.schema.createIndex('oauth_grants_account').on('oauth_grants').columns(['account_id', 'created_at']).execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('oauth_grants').execute();
  await db.schema.dropTable('oauth_records').execute();
}
