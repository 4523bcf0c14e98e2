import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import type { TestContext } from '../support/app.ts';
import { createMachine, finishBoot, newOwner, workerPass, type Owner } from '../support/machines.ts';
import { createBillingTestApp, ledgerOf, saveCard, topUp } from './helpers.ts';

const MINUTE = 60_000;
const ENV = { MACHINE_PRICES: 'small=0.013,medium=0.10,large=0.20', METERING_INTERVAL: '60s' };

interface Line {
  id: string;
  day: string;
  kind: string;
  amount: string;
  machine: { id: string; name: string | null; size: string | null } | null;
  seconds: number | null;
  transaction: { id: string; kind: string; amount: string } | null;
}

/** "-0.003900" → -3900: compared as integers, never as floats. */
const micros = (amount: string) => (amount.startsWith('-') ? -1 : 1) * Number(amount.replace('-', '').replace('.', ''));

/** Issue 38 point 8: Billing listed one transaction per machine per minute (33 rows for two machines in 18 minutes). */
describe('GET /api/billing/statement', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createBillingTestApp({ env: ENV });
  });
  after(() => ctx.close());

  async function fundedOwner(): Promise<Owner> {
    const owner = await newOwner(ctx);
    await saveCard(owner);
    assert.equal((await topUp(ctx, owner, '50.00')).statusCode, 201);
    return owner;
  }

  async function statementOf(owner: Owner, query = ''): Promise<{ data: Line[]; nextCursor: string | null }> {
    const response = await owner.call('GET', `/api/billing/statement${query}`);
    assert.equal(response.statusCode, 200, response.body);
    return response.json();
  }

  /** Two machines run `minutes` of the injected clock, charged every minute, then stop. */
  async function runTwo(owner: Owner, minutes: number) {
    const machines = [await createMachine(owner, { name: 'alpha', size: 'small' }), await createMachine(owner, { name: 'beta', size: 'small' })];
    await finishBoot(ctx);
    for (let minute = 0; minute < minutes; minute++) {
      ctx.clock.advance(MINUTE);
      await workerPass(ctx);
    }
    for (const machine of machines) assert.equal((await owner.call('POST', `/api/machines/${machine.id}/stop`)).statusCode, 200);
    await workerPass(ctx);
    return machines;
  }

  /** Every usage line equals the sum of its machine's ledger entries ending that day, to the micro-dollar and millisecond. */
  async function assertLinesSumTheLedger(owner: Owner, lines: Line[]) {
    const ledger = await ledgerOf(ctx, owner.user.id);
    const usage = ledger.filter((entry) => entry.kind === 'usage');
    for (const line of lines.filter((l) => l.kind === 'usage')) {
      const entries = usage.filter((entry) => entry.machine_id === line.machine!.id && new Date(entry.period_end!).toISOString().slice(0, 10) === line.day);
      assert.ok(entries.length > 0);
      assert.equal(micros(line.amount), entries.reduce((sum, entry) => sum + Number(entry.amount_micros), 0), `${line.id}: the amount is the entries' sum exactly`);
      assert.equal(line.seconds! * 1000, entries.reduce((sum, entry) => sum + (entry.period_end! - entry.period_start!), 0), `${line.id}: the running time`);
    }
    const statementTotal = lines.reduce((sum, line) => sum + micros(line.amount), 0);
    assert.equal(statementTotal, ledger.reduce((sum, entry) => sum + Number(entry.amount_micros), 0), "the lines sum to the ledger's sum");
  }

  test('two machines for 18 minutes: two usage lines and the top-up, not a row per machine per minute; the ledger is unchanged', async () => {
    const owner = await fundedOwner();
    const [alpha, beta] = await runTwo(owner, 18);

    const transactions = (await owner.call('GET', '/api/billing/transactions?limit=100')).json() as { data: Array<{ kind: string }> };
    const usageEntries = transactions.data.filter((t) => t.kind === 'usage').length;
    assert.ok(usageEntries >= 36, `the ledger keeps a charge per machine per minute (${usageEntries})`);

    const { data: lines, nextCursor } = await statementOf(owner);
    assert.equal(nextCursor, null);
    assert.deepEqual(lines.map((line) => [line.kind, line.machine?.name ?? null]).sort(), [['top_up', null], ['usage', 'alpha'], ['usage', 'beta']]);
    const day = new Date(ctx.clock.now()).toISOString().slice(0, 10);
    for (const line of lines) assert.equal(line.day, day);
    for (const machine of [alpha!, beta!]) {
      const line = lines.find((l) => l.machine?.id === machine.id)!;
      assert.deepEqual(line.machine, { id: machine.id, name: machine.name, size: 'small' });
      assert.equal(line.id, `${day}/${machine.id}`);
      assert.equal(line.seconds, 18 * 60, '18 minutes of running');
      assert.equal(line.transaction, null);
    }
    // The credit line carries its ledger entry as /api/billing/transactions lists it.
    const credit = lines.find((line) => line.kind === 'top_up')!;
    const [topUpEntry] = (await owner.call('GET', '/api/billing/transactions?limit=100')).json().data.filter((t: { kind: string }) => t.kind === 'top_up');
    assert.deepEqual(credit.transaction, topUpEntry);
    assert.equal(credit.amount, '50.000000');
    assert.deepEqual(lines.map((line) => line.id), lines.map((line) => line.id).sort().reverse(), 'listed by id, descending');
    await assertLinesSumTheLedger(owner, lines);
  });

  test('a charge counts on the UTC day its period ends: across midnight each machine has a line per day; pages walk every line once', async () => {
    const owner = await fundedOwner();
    const now = ctx.clock.now();
    const midnight = Math.ceil(now / 86_400_000) * 86_400_000;
    ctx.clock.advance(midnight - 5 * MINUTE - 30_000 - now);
    await runTwo(owner, 10);
    const lines = (await statementOf(owner)).data;
    const usage = lines.filter((line) => line.kind === 'usage');
    assert.equal(usage.length, 4, 'two machines × two days');
    assert.deepEqual([...new Set(usage.map((line) => line.day))], [new Date(midnight).toISOString().slice(0, 10), new Date(midnight - 1).toISOString().slice(0, 10)], 'the newer day first');
    await assertLinesSumTheLedger(owner, lines);

    const paged: Line[] = [];
    let cursor: string | null = null;
    do {
      const page: { data: Line[]; nextCursor: string | null } = await statementOf(owner, `?limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      assert.equal(page.data.length, 1);
      paged.push(...page.data);
      cursor = page.nextCursor;
    } while (cursor !== null);
    assert.deepEqual(paged, lines);
    const two = await statementOf(owner, '?limit=2');
    assert.deepEqual((await statementOf(owner, `?limit=2&cursor=${encodeURIComponent(two.nextCursor!)}`)).data, lines.slice(2, 4));
  });

  test('errors: a bad cursor or limit is 400 invalid_request; another account sees none of these lines', async () => {
    const owner = await newOwner(ctx);
    for (const query of ['cursor=bad', 'cursor=2026-13-45/mch_01jd0000000000000000000042', 'cursor=txn_01jd0000000000000000000042', 'limit=0', 'limit=101', 'other=1']) {
      const response = await owner.call('GET', `/api/billing/statement?${query}`);
      assert.equal(response.statusCode, 400, query);
      assert.equal(response.json().code, 'invalid_request');
    }
    assert.deepEqual(await statementOf(owner), { data: [], nextCursor: null });
    assert.equal((await ctx.app.inject({ method: 'GET', url: '/api/billing/statement' })).statusCode, 401);
  });
});
