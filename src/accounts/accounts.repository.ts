import { sql, type Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import { toIso } from '../shared/clock.ts';
import type { AccountsTable } from './accounts.tables.ts';
import type { AccountView, SecondFactorView } from '../http/principal.ts';

/** The account as responses show it (the shape an API key's principal carries too). */
export type Account = AccountView;

export interface AccountWithPassword extends Account {
  passwordHash: string;
}

/** The columns an account shows; other tables join them in (an API key read with its owner). */
export type AccountPublicRow = Pick<AccountsTable, 'id' | 'email' | 'name' | 'email_verified_at' | 'created_at'>;

export function toAccount(row: AccountPublicRow): Account {
  return {
    id: row.id,
    email: row.email,
    name: row.name,
    emailVerified: row.email_verified_at !== null,
    createdAt: toIso(row.created_at),
  };
}

function toAccountWithPassword(row: AccountsTable): AccountWithPassword {
  return { ...toAccount(row), passwordHash: row.password_hash };
}

export async function findAccountByEmail(db: Kysely<DB>, email: string): Promise<AccountWithPassword | undefined> {
  const row = await db.selectFrom('accounts').selectAll().where('email', '=', email).executeTakeFirst();
  return row && toAccountWithPassword(row);
}


export async function findAccountById(db: Kysely<DB>, id: string): Promise<AccountWithPassword | undefined> {
  const row = await db.selectFrom('accounts').selectAll().where('id', '=', id).executeTakeFirst();
  return row && toAccountWithPassword(row);
}

export async function insertAccount(db: Kysely<DB>, row: AccountsTable): Promise<AccountWithPassword> {
  await db.insertInto('accounts').values(row).execute();
  return toAccountWithPassword(row);
}

export async function updatePasswordHash(db: Kysely<DB>, id: string, passwordHash: string, now: number): Promise<void> {
  await db.updateTable('accounts').set({ password_hash: passwordHash, updated_at: now }).where('id', '=', id).execute();
}

/** True when this call confirmed it (it was not confirmed before). */
export async function markEmailVerified(db: Kysely<DB>, id: string, now: number): Promise<boolean> {
  const result = await db
    .updateTable('accounts')
    .set({ email_verified_at: now, updated_at: now })
    .where('id', '=', id)
    .where('email_verified_at', 'is', null)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/** Strips what must never leave the service. */
export function publicAccount({ passwordHash: _hash, ...account }: AccountWithPassword): Account {
  return account;
}

/**
 * The account's second factors as counts, for a query that reads the account
 * (`accountId` a column reference such as `a.id`): an API key's `GET /api/me` needs no read of its own.
 */
export function secondFactorCounts(accountIdColumn: string) {
  const account = sql.ref(accountIdColumn);
  return [
    sql<number>`(select count(*) from totp_factors where totp_factors.account_id = ${account} and totp_factors.confirmed_at is not null)`.as('sf_totp'),
    sql<number>`(select count(*) from passkeys where passkeys.account_id = ${account})`.as('sf_passkeys'),
    sql<number>`(select count(*) from recovery_codes where recovery_codes.account_id = ${account} and recovery_codes.used_at is null)`.as('sf_recovery'),
  ];
}

export function toSecondFactorView(row: { sf_totp: number | null; sf_passkeys: number | null; sf_recovery: number | null }): SecondFactorView {
  return { totp: Number(row.sf_totp) > 0, passkeys: Number(row.sf_passkeys), recoveryCodesLeft: Number(row.sf_recovery) };
}
