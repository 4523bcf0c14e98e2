import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { createTestApp, settled, type TestContext } from '../support/app.ts';
import { assertProblem } from '../support/problem.ts';

const counters = async (ctx: TestContext) => (await ctx.app.deps.db.selectFrom('rate_limits').select('key').execute()).length;

/**
 * Issue 38, point 7: sign-in, sign-up and forgot counted the email's limit
 * before the address's, so a client over its address's limit still added a
 * counter row for every email it made up. The address is checked first now.
 */
describe('a client over its address limit adds no counter per new email', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestApp();
  });
  after(() => ctx.close());

  const post = (url: string, ip: string, payload: object) => ctx.app.inject({ method: 'POST', url, remoteAddress: ip, payload });

  test('regression: sign-in, past 100 attempts per address in 15 minutes', async () => {
    const ip = '198.18.0.1';
    for (let i = 0; i < 100; i++) assertProblem(await post('/api/auth/login', ip, { email: `nobody-${i}@example.com`, password: 'whatever1' }), 401, 'invalid_credentials');
    const before = await counters(ctx);
    for (let i = 100; i < 120; i++) assertProblem(await post('/api/auth/login', ip, { email: `nobody-${i}@example.com`, password: 'whatever1' }), 429, 'rate_limited');
    assert.equal(await counters(ctx), before);
  });

  test('regression: sign-up, past 20 per address in an hour', async () => {
    const ip = '198.18.0.2';
    for (let i = 0; i < 20; i++) assert.equal((await post('/api/auth/register', ip, { email: `new-${i}@example.com`, password: 'long enough', name: 'N' })).statusCode, 201);
    const before = await counters(ctx);
    for (let i = 20; i < 40; i++) assertProblem(await post('/api/auth/register', ip, { email: `new-${i}@example.com`, password: 'long enough', name: 'N' }), 429, 'rate_limited');
    assert.equal(await counters(ctx), before);
    assert.equal((await ctx.app.deps.db.selectFrom('accounts').select('id').where('email', 'like', 'new-%').execute()).length, 20, 'no account past the limit');
  });

  test('regression: forgot, past 20 reset mails per address in an hour (still {ok:true})', async () => {
    const ip = '198.18.0.3';
    for (let i = 0; i < 20; i++) assert.equal((await post('/api/auth/forgot', ip, { email: `stranger-${i}@example.com` })).statusCode, 200);
    await settled(ctx);
    const before = await counters(ctx);
    for (let i = 20; i < 40; i++) assert.deepEqual((await post('/api/auth/forgot', ip, { email: `stranger-${i}@example.com` })).json(), { ok: true });
    await settled(ctx);
    assert.equal(await counters(ctx), before);
  });
});
