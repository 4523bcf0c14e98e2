import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { DB } from '../../db/database.ts';

const SIGNING_KEY_NAME = 'machine-previews';

/**
 * The key previews are signed with, made by whichever process asks first (an
 * insert that leaves an existing key alone, then a read), so every process
 * checks what another signed. Keys never change: kept once read.
 */
export function previewSigningKey(db: Kysely<DB>, now: () => number): () => Promise<Buffer> {
  let key: Promise<Buffer> | null = null;
  return () => {
    key ??= (async () => {
      await db
        .insertInto('signing_keys')
        .values({ name: SIGNING_KEY_NAME, secret: randomBytes(32).toString('base64url'), created_at: now() })
        .onConflict((conflict) => conflict.column('name').doNothing())
        .execute();
      const row = await db.selectFrom('signing_keys').select('secret').where('name', '=', SIGNING_KEY_NAME).executeTakeFirstOrThrow();
      return Buffer.from(row.secret, 'base64url');
    })().catch((error: unknown) => {
      key = null;
      throw error;
    });
    return key;
  };
}

export async function publicPortsOf(db: Kysely<DB>, machineId: string): Promise<number[]> {
  const rows = await db.selectFrom('public_preview_ports').select('port').where('machine_id', '=', machineId).orderBy('port').execute();
  return rows.map((row) => row.port);
}

export async function isPublicPort(db: Kysely<DB>, machineId: string, port: number): Promise<boolean> {
  const row = await db.selectFrom('public_preview_ports').select('port').where('machine_id', '=', machineId).where('port', '=', port).executeTakeFirst();
  return row !== undefined;
}

export async function makePortPublic(db: Kysely<DB>, machineId: string, port: number, now: number): Promise<void> {
  await db
    .insertInto('public_preview_ports')
    .values({ machine_id: machineId, port, created_at: now })
    .onConflict((conflict) => conflict.columns(['machine_id', 'port']).doNothing())
    .execute();
}

export async function makePortPrivate(db: Kysely<DB>, machineId: string, port: number): Promise<void> {
  await db.deleteFrom('public_preview_ports').where('machine_id', '=', machineId).where('port', '=', port).execute();
}
