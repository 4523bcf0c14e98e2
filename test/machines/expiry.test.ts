import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import type { TestContext } from '../support/app.ts';
import { breakProvider, createMachine, eventsOf, newOwner, workerPass, type Owner } from '../support/machines.ts';
import { createBillingTestApp, saveCard, topUp } from '../billing/helpers.ts';

/** The boot time of issue 38's report: an expiry at the boot's end was lost. */
const BOOT_MS = 2000;
/** An expiry that meets a stop under way looks again this much later (machines.jobs.ts). */
const EXPIRY_WAIT_MS = 5000;

type Arrival = 'created' | 'claimed' | 'restarted';

async function fundedOwner(ctx: TestContext): Promise<Owner> {
  const owner = await newOwner(ctx);
  await saveCard(owner);
  assert.equal((await topUp(ctx, owner, '100.00')).statusCode, 201);
  return owner;
}

describe('machine expiry around the end of a boot (issue 38, point 6)', () => {
  let ctx: TestContext;
  let owner: Owner;
  before(async () => {
    ctx = await createBillingTestApp({ env: { MACHINE_BOOT_MS: String(BOOT_MS) } });
    owner = await fundedOwner(ctx);
  });
  after(() => ctx.close());

  const statusOf = async (id: string) => (await owner.call('GET', `/api/machines/${id}`)).json().status as string;

  /**
   * Brings a machine to the start of a boot that ends at the returned time, expiring at that end + `offset`
   * (never before the request that sets it: the API refuses an expiresAt in the past).
   */
  async function bootingMachine(arrival: Arrival, offset: number, onExpire: 'stop' | 'destroy', run: number): Promise<{ id: string; bootEnd: number; expiresAt: number }> {
    const name = `m-${run}`;
    const start = ctx.clock.now();
    if (arrival === 'created') {
      const expiresAt = Math.max(start + BOOT_MS + offset, start + 1);
      const machine = await createMachine(owner, { name, size: 'small', expiresAt: new Date(expiresAt).toISOString(), onExpire });
      return { id: machine.id, bootEnd: start + BOOT_MS, expiresAt };
    }
    if (arrival === 'claimed') {
      const pool = await owner.call('POST', '/api/pools', { name: `pool-${run}`, size: 'small', count: 1 });
      assert.equal(pool.statusCode, 201, pool.body);
      const expiresAt = Math.max(start + BOOT_MS + offset, start + 1);
      const claim = await owner.call('POST', '/api/machines', { name, pool: `pool-${run}`, expiresAt: new Date(expiresAt).toISOString(), onExpire });
      assert.equal(claim.statusCode, 201, claim.body);
      // The pool's replacement is of no interest here: the pool goes, and its machines with it.
      assert.equal((await owner.call('DELETE', `/api/pools/${pool.json().id}`)).statusCode, 204);
      return { id: claim.json().id, bootEnd: start + BOOT_MS, expiresAt };
    }
    // Restarted: created with its expiry, booted, stopped and started again at once; the second boot ends 2 boots after creation.
    const expiresAt = start + 2 * BOOT_MS + offset;
    const machine = await createMachine(owner, { name, size: 'small', expiresAt: new Date(expiresAt).toISOString(), onExpire });
    ctx.clock.advance(BOOT_MS);
    await workerPass(ctx);
    if ((await statusOf(machine.id)) === 'running') {
      assert.equal((await owner.call('POST', `/api/machines/${machine.id}/stop`)).statusCode, 200);
      const restart = await owner.call('POST', `/api/machines/${machine.id}/start`);
      assert.equal(restart.statusCode, 200, restart.body);
    }
    // Else it expired with its first boot: what follows must still hold.
    return { id: machine.id, bootEnd: start + 2 * BOOT_MS, expiresAt };
  }

  test('every machine whose expiresAt passes expires once, ends stopped or destroyed, and is no longer billed', async () => {
    let run = 0;
    const offset = fc.oneof(fc.constantFrom(-1, 0, 1), fc.integer({ min: -3000, max: 3000 }));
    const arrival = fc.constantFrom<Arrival>('created', 'claimed', 'restarted');
    const step = fc.oneof(fc.constantFrom(500, 1000, 2000, 3000), fc.integer({ min: 100, max: 4000 }));
    const onExpire = fc.constantFrom<'stop' | 'destroy'>('stop', 'destroy');
    await fc.assert(
      fc.asyncProperty(offset, arrival, step, onExpire, async (offset, arrival, step, onExpire) => {
        run++;
        const machine = await bootingMachine(arrival, offset, onExpire, run);
        // Past the boot, the expiry and a stop's wait: by then everything due has happened.
        const until = Math.max(machine.bootEnd, machine.expiresAt) + EXPIRY_WAIT_MS + step;
        while (ctx.clock.now() < until) {
          ctx.clock.advance(step);
          await workerPass(ctx);
        }
        const mine = (await eventsOf(ctx, owner)).filter((event) => (event.data.machine as { id: string }).id === machine.id);
        const expired = mine.filter((event) => event.type === 'machine.expired');
        const types = mine.map((event) => event.type).join(', ');
        assert.equal(expired.length, 1, `exactly one machine.expired (events: ${types})`);
        assert.equal(await statusOf(machine.id), onExpire === 'destroy' ? 'destroyed' : 'stopped', `events: ${types}`);
        const meter = await ctx.app.deps.db.selectFrom('billing_meters').select('metered_until').where('machine_id', '=', machine.id).executeTakeFirst();
        assert.equal(meter?.metered_until ?? null, null, 'its meter is closed');
      }),
      { numRuns: 100 },
    );
  });

  for (const overtaker of ['a pool claim', 'a token change'] as const) {
    test(`regression: a boot's check overtaken by ${overtaker} was dropped, leaving the machine starting for ever`, async () => {
      const run = overtaker === 'a pool claim' ? 'claim' : 'token';
      let machineId: string;
      if (overtaker === 'a pool claim') {
        const pool = await owner.call('POST', '/api/pools', { name: `overtaken-${run}`, size: 'small', count: 1 });
        assert.equal(pool.statusCode, 201, pool.body);
        machineId = (await ctx.app.deps.db.selectFrom('machines').select('id').where('pool_id', '=', pool.json().id).executeTakeFirstOrThrow()).id;
      } else {
        machineId = (await createMachine(owner, { name: `overtaken-${run}`, size: 'small' })).id;
      }
      // While the check asks the host, the request changes the machine (a new version), as a claim or rotation from another process would.
      let overtaken = false;
      const restore = breakProvider(ctx, 'observe', (m) => m.id === machineId && !overtaken, async () => {
        overtaken = true;
        const response =
          overtaker === 'a pool claim'
            ? await owner.call('POST', '/api/machines', { name: `claimed-${run}`, pool: `overtaken-${run}` })
            : await owner.call('POST', `/api/machines/${machineId}/mcp-token`);
        assert.equal(response.statusCode, overtaker === 'a pool claim' ? 201 : 200, response.body);
      });
      try {
        ctx.clock.advance(BOOT_MS);
        await workerPass(ctx);
      } finally {
        restore();
      }
      assert.ok(overtaken, 'the check met the change');
      ctx.clock.advance(60_000);
      await workerPass(ctx);
      assert.equal(await statusOf(machineId), 'running');
      const created = (await eventsOf(ctx, owner)).filter((event) => event.type === 'machine.created' && (event.data.machine as { id: string }).id === machineId);
      assert.equal(created.length, 1, 'machine.created once');
    });
  }
});
