import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { settled, type TestContext } from '../support/app.ts';
import { onPostgres } from '../support/database.ts';
import { newOwner } from '../support/machines.ts';
import { card, createBillingTestApp, ledgerOf, MASTERCARD, VISA } from './helpers.ts';

// SQLite: two connections in one Node process cannot wait for each other (the busy wait blocks the event loop
// both need); there, write transactions run one at a time anyway. test/billing/crash.test.ts runs real processes.
describe('the welcome credit across two processes on one PostgreSQL database', { skip: !onPostgres && 'PostgreSQL: two connections at once in one process' }, () => {
  let first: TestContext;
  let second: TestContext;
  before(async () => {
    first = await createBillingTestApp();
    second = await createBillingTestApp({ database: first.database, smtp: first.smtp });
  });
  after(async () => {
    await second.close();
    await first.close();
  });

  test('the confirmation in one process and cards saved in the other at the same instant: credited once, one mail', async () => {
    for (let round = 0; round < 5; round++) {
      const owner = await newOwner(first);
      await settled(first);
      const mail = first.smtp.to(owner.user.email).at(-1)!;
      const token = /token=([A-Za-z0-9_-]+)/.exec(mail.text)![1]!;
      const headers = { authorization: `Bearer ${owner.key}` };
      const answers = await Promise.all([
        first.app.inject({ method: 'POST', url: '/api/auth/verify', headers: { origin: first.config.publicUrl }, payload: { token } }),
        ...Array.from({ length: 19 }, (_, i) =>
          (i % 2 ? first : second).app.inject({ method: 'PUT', url: '/api/billing/payment-method', headers, payload: card(i % 3 ? VISA : MASTERCARD) })),
      ]);
      assert.deepEqual(answers.map((a) => a.statusCode), Array(20).fill(200));
      assert.deepEqual((await ledgerOf(first, owner.user.id)).map((e) => [e.kind, e.amount_micros]), [['welcome_credit', 10_000_000]], `round ${round}`);
      await settled(first);
      await settled(second);
      assert.equal(first.smtp.to(owner.user.email).filter((m) => m.subject === 'Your welcome credit has arrived').length, 1);
    }
  });
});
