import { strict as assert } from 'node:assert';
import { mkdtemp, readdir, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { asBearer, settled, type TestContext } from '../support/app.ts';
import { onPostgres } from '../support/database.ts';
import { newOwner } from '../support/machines.ts';
import { card, confirmEmail, createBillingTestApp, DECLINING_CARD, MASTERCARD, REFUSED_CARD, topUp, VISA } from './helpers.ts';

const NUMBERS = [VISA, MASTERCARD, REFUSED_CARD, DECLINING_CARD, '4242424242424241', '5555555555554443'];

/** Every row of every table of ours, as text. */
async function everyRow(ctx: TestContext): Promise<string> {
  const db = ctx.app.deps.db;
  const tables = onPostgres
    ? (await sql<{ name: string }>`select table_name as name from information_schema.tables where table_schema = current_schema()`.execute(db)).rows
    : (await sql<{ name: string }>`select name from sqlite_master where type = 'table'`.execute(db)).rows;
  assert.ok(tables.some((t) => t.name === 'billing_accounts'));
  let text = '';
  for (const { name } of tables) text += JSON.stringify((await sql`select * from ${sql.table(name)}`.execute(db)).rows);
  return text;
}

describe('card numbers are never stored, logged or returned (CONTRACT 12)', () => {
  let ctx: TestContext;
  let dir: string;
  const logs: string[] = [];
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'card-leaks-'));
    ctx = await createBillingTestApp({ logs, env: { LOG_LEVEL: 'trace' }, ...(onPostgres ? {} : { sqlitePath: join(dir, 'service.db') }) });
  });
  after(() => ctx.close());

  test('after saving, refusing, replacing and charging cards, and every kind of bad card request', async () => {
    const owner = await newOwner(ctx);
    await confirmEmail(ctx, owner.user);
    const put = (body: unknown, headers: Record<string, string> = {}) =>
      ctx.app.inject({ method: 'PUT', url: '/api/billing/payment-method', headers: { ...asBearer(owner.key), ...headers }, payload: body as string });
    assert.equal((await put(card(VISA, { cvc: '9731' }))).statusCode, 200);
    assert.equal((await put(card(REFUSED_CARD))).statusCode, 402);
    assert.equal((await put(card('4242424242424241'))).statusCode, 400);
    assert.equal((await put(card(MASTERCARD, { expYear: 2020 }))).statusCode, 400);
    assert.equal((await put(card(MASTERCARD, { cvc: '1' }))).statusCode, 400);
    assert.equal((await put(card(MASTERCARD, { unknown: '5555555555554443' }))).statusCode, 400);
    assert.equal((await put(`{"number":"${MASTERCARD}","cvc":`, { 'content-type': 'application/json' })).statusCode, 400, 'malformed JSON');
    assert.equal((await put(`number=${MASTERCARD}`, { 'content-type': 'application/x-www-form-urlencoded' })).statusCode, 415);
    assert.equal((await put(card(MASTERCARD))).statusCode, 200);
    assert.equal((await topUp(ctx, owner, '20.00')).statusCode, 201);
    assert.equal((await put(card(DECLINING_CARD))).statusCode, 200);
    assert.equal((await topUp(ctx, owner, '20.00')).statusCode, 402);
    assert.equal((await owner.call('GET', '/api/billing')).statusCode, 200);
    await settled(ctx);

    const places: Array<[string, string]> = [
      ['responses', ctx.responses.join('\n')],
      ['logs', logs.join('\n')],
      ['mails', ctx.smtp.messages.map((mail) => mail.raw).join('\n')],
      ['tables', await everyRow(ctx)],
    ];
    if (!onPostgres) {
      // The file itself, and its write-ahead log, byte for byte.
      for (const name of await readdir(dir)) places.push([`file ${name}`, (await readFile(join(dir, name))).toString('latin1')]);
    }
    assert.ok(logs.some((line) => line.includes('/api/billing/payment-method')), 'the requests were logged');
    assert.ok(places.find(([where]) => where === 'tables')![1].includes('"card_last4":"9995"'), 'the scan reads the billing tables');
    if (!onPostgres) assert.ok(places.some(([where]) => where === 'file service.db'), 'and the database file');
    for (const [where, text] of places) {
      for (const number of NUMBERS) assert.ok(!text.includes(number), `${number} found in ${where}`);
    }
    assert.ok(!ctx.responses.some((body) => body.includes('9731')), 'the cvc is never returned');
  });
});
