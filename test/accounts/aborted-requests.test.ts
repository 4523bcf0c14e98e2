import { strict as assert } from 'node:assert';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { passwordHashingLoad } from '../../src/accounts/passwords.ts';
import { createTestApp, PUBLIC_URL, registerUser, settled, signIn, type TestContext } from '../support/app.ts';
import { linkIn } from '../support/mail.ts';
import { eventually } from '../support/receiver.ts';

/**
 * A client that sends a whole request and hangs up at once, before any answer:
 * the change still happens, so the mail that goes with it must go out too.
 */
describe('mail that goes with a change goes out even when the client hangs up', () => {
  let ctx: TestContext;
  let port: number;
  before(async () => {
    // A realistic hash (tens of milliseconds), so a request can be caught while it is being handled.
    ctx = await createTestApp({ passwordHashCost: { memoryKiB: 8192, passes: 2, parallelism: 1 } });
    await ctx.app.listen({ port: 0, host: '127.0.0.1' });
    port = (ctx.app.server.address() as { port: number }).port;
  });
  after(() => ctx.close());

  /**
   * Writes a complete POST and destroys the socket as soon as the bytes are out,
   * or, with `until`, as soon as the server is busy with the request.
   */
  function postAndHangUp(path: string, body: unknown, headers: Record<string, string> = {}, until?: () => boolean): Promise<void> {
    const json = JSON.stringify(body);
    const head = Object.entries({ host: '127.0.0.1', origin: PUBLIC_URL, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(json)), ...headers })
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('');
    return new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.write(`POST ${path} HTTP/1.1\r\n${head}\r\n${json}`, async () => {
          const deadline = Date.now() + 5000;
          while (until !== undefined && !until() && Date.now() < deadline) await new Promise((wait) => setTimeout(wait, 1));
          socket.destroy();
          resolve();
        });
      });
      socket.on('error', reject);
    });
  }

  const mailTo = (email: string, subject: string) => () => ctx.smtp.to(email).find((mail) => mail.subject === subject);

  test('POST /api/auth/reset: the password changes and the security notice is sent', async () => {
    // Regression: mail was started in onResponse, which never fires when the client disconnects.
    const user = await registerUser(ctx);
    await ctx.app.inject({ method: 'POST', url: '/api/auth/forgot', headers: { origin: PUBLIC_URL }, payload: { email: user.email } });
    await settled(ctx);
    const { token } = linkIn(mailTo(user.email, 'Reset your password')()!, '/reset-password');

    await postAndHangUp('/api/auth/reset', { token, password: 'a password after hanging up' });
    await eventually(mailTo(user.email, 'Your password was changed'), 5000, 'the security notice');
    assert.ok(await signIn(ctx, { email: user.email, password: 'a password after hanging up' }));
  });

  test('POST /api/me/password: the security notice is sent', async () => {
    const user = await registerUser(ctx);
    await settled(ctx);
    // Hung up once the server is hashing: a hang-up that comes first, while the session is looked up, ends the
    // request before its body is read (on PostgreSQL, where the lookup takes longer), and then nothing changes.
    const hashing = () => passwordHashingLoad().running > 0;
    await postAndHangUp('/api/me/password', { currentPassword: user.password, newPassword: 'changed then hung up' }, { cookie: `session=${user.session}` }, hashing);
    await eventually(mailTo(user.email, 'Your password was changed'), 5000, 'the security notice');
    assert.ok(await signIn(ctx, { email: user.email, password: 'changed then hung up' }));
  });

  test('POST /api/auth/register: the confirmation mail is sent', async () => {
    const email = `hang-up-${Date.now()}@example.com`;
    await postAndHangUp('/api/auth/register', { email, password: 'long enough password', name: 'Gone' });
    await eventually(mailTo(email, 'Confirm your email address'), 5000, 'the confirmation mail');
  });

  test('POST /api/auth/forgot: the reset link is sent', async () => {
    const user = await registerUser(ctx);
    await postAndHangUp('/api/auth/forgot', { email: user.email });
    await eventually(mailTo(user.email, 'Reset your password'), 5000, 'the reset mail');
  });
});
