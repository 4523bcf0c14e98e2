import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { asSession, createTestApp, registerUser, signIn, type TestContext } from '../support/app.ts';
import { assertProblem } from '../support/problem.ts';

describe('routes that take no body refuse one with fields', () => {
  let ctx: TestContext;
  before(async () => {
    ctx = await createTestApp();
  });
  after(() => ctx.close());

  const send = (method: 'POST' | 'DELETE', url: string, session: string, payload?: string) =>
    ctx.app.inject({
      method,
      url,
      headers: { ...asSession(session), ...(payload === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(payload === undefined ? {} : { payload }),
    });

  test('logout, me/verify-email and DELETE me/sessions/{id}: unknown fields are 400; no body or {} is fine', async () => {
    // Regression: these routes had no body schema and accepted any JSON, ignoring it.
    const user = await registerUser(ctx);
    const other = await signIn(ctx, user);
    const sessions = (await ctx.app.inject({ method: 'GET', url: '/api/me/sessions', headers: asSession(user.session) })).json().data;
    const otherId: string = sessions.find((session: { current: boolean }) => !session.current).id;

    for (const body of ['{"everywhere":true}', '[]', '"x"', '1']) {
      assertProblem(await send('POST', '/api/auth/logout', user.session, body), 400, 'invalid_request');
      assertProblem(await send('POST', '/api/me/verify-email', user.session, body), 400, 'invalid_request');
      assertProblem(await send('DELETE', `/api/me/sessions/${otherId}`, user.session, body), 400, 'invalid_request');
    }
    assert.equal((await ctx.app.inject({ method: 'GET', url: '/api/me', headers: asSession(other) })).statusCode, 200, 'nothing was signed out');

    assert.equal((await send('POST', '/api/me/verify-email', user.session)).statusCode, 202);
    assert.equal((await send('POST', '/api/me/verify-email', user.session, '{}')).statusCode, 202);
    assert.equal((await send('DELETE', `/api/me/sessions/${otherId}`, user.session, '{}')).statusCode, 204);
    assert.equal((await send('POST', '/api/auth/logout', user.session, '{}')).statusCode, 204);
    const third = await signIn(ctx, user);
    assert.equal((await send('POST', '/api/auth/logout', third)).statusCode, 204);
  });
});
