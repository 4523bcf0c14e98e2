import { strict as assert } from 'node:assert';
import { before, describe, test } from 'node:test';
import { createMachine, finishBoot, finishedRun, machineSuite, newOwner, workerPass, type Owner } from '../support/machines.ts';

interface Envelope {
  id: string;
  type: string;
  data: { machine?: { id: string; name: string }; run?: { id: string } };
}

/** Issue 38 point 8: the events listed only by type; a machine's own events could not be asked for. */
describe('GET /api/events?machineId', () => {
  const suite = machineSuite();
  let other: Owner;

  before(async () => {
    other = await newOwner(suite.ctx);
  });

  const eventsOf = async (who: Owner, query: string) => {
    const response = await who.call('GET', `/api/events?${query}`);
    assert.equal(response.statusCode, 200, response.body);
    return response.json() as { data: Envelope[]; nextCursor: string | null };
  };

  test("one machine's events, its runs' included, newest first and in pages; nothing of another machine or account", async () => {
    const first = await createMachine(suite.owner, { name: 'first-box' });
    const second = await createMachine(suite.owner, { name: 'second-box' });
    await finishBoot(suite.ctx);
    const run = await finishedRun(suite.ctx, suite.owner, first.id, { command: 'echo hi' });
    assert.equal((await suite.owner.call('POST', `/api/machines/${second.id}/stop`)).statusCode, 200);
    assert.equal((await suite.owner.call('POST', `/api/machines/${first.id}/stop`)).statusCode, 200);
    await workerPass(suite.ctx);

    const all = (await eventsOf(suite.owner, 'limit=100')).data;
    const expected = all.filter((event) => event.data.machine?.id === first.id);
    assert.ok(expected.length >= 3, `machine.created, run.succeeded, machine.stopped at least (${expected.map((e) => e.type).join(', ')})`);
    assert.ok(expected.some((event) => event.data.run?.id === run.id), "the machine's run event");
    assert.ok(all.some((event) => event.data.machine?.id === second.id), 'the other machine has events too');

    const filtered = await eventsOf(suite.owner, `machineId=${first.id}`);
    assert.deepEqual(filtered.data, expected, 'the same envelopes, newest first');
    assert.equal(filtered.nextCursor, null);

    // Pages of one walk the whole list once.
    const paged: Envelope[] = [];
    let cursor: string | null = null;
    do {
      const page: { data: Envelope[]; nextCursor: string | null } = await eventsOf(suite.owner, `machineId=${first.id}&limit=1${cursor ? `&cursor=${cursor}` : ''}`);
      assert.ok(page.data.length <= 1);
      paged.push(...page.data);
      cursor = page.nextCursor;
    } while (cursor !== null);
    assert.deepEqual(paged.map((e) => e.id), expected.map((e) => e.id));

    const stopped = await eventsOf(suite.owner, `machineId=${first.id}&type=machine.stopped`);
    assert.deepEqual(stopped.data.map((e) => e.id), expected.filter((e) => e.type === 'machine.stopped').map((e) => e.id));

    assert.deepEqual((await eventsOf(other, `machineId=${first.id}`)).data, [], "another account sees nothing of this machine's events");
  });

  test('a malformed machineId is 400 invalid_request; a well-formed one of no machine lists nothing', async () => {
    assert.deepEqual(await eventsOf(suite.owner, 'machineId=mch_01jd0000000000000000000042'), { data: [], nextCursor: null });
    for (const machineId of ['nope', 'mch_short', 'evt_01jd0000000000000000000042', 'mch_01JD0000000000000000000042', '']) {
      const response = await suite.owner.call('GET', `/api/events?machineId=${encodeURIComponent(machineId)}`);
      assert.equal(response.statusCode, 400, machineId);
      assert.equal(response.json().code, 'invalid_request');
    }
  });
});
