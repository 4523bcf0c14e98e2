import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import { toIso } from '../shared/clock.ts';
import type { AccountsTable } from './accounts.tables.ts';
import type { AccountView } from '../http/principal.ts';

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

export async function markEmailVerified(db: Kysely<DB>, id: string, now: number): Promise<void> {
  await db
    .updateTable('accounts')
    .set({ email_verified_at: now, updated_at: now })
    .where('id', '=', id)
    .where('email_verified_at', 'is', null)
    .execute();
}

/** Strips what must never leave the service. */
export function publicAccount({ passwordHash: _hash, ...account }: AccountWithPassword): Account {
  return account;
}
