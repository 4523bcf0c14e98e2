import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { isDeliverableAddress } from '../../src/accounts/accounts.service.ts';
import { createTestApp, PUBLIC_URL, registerUser, settled, type TestContext } from '../support/app.ts';
import { assertProblem } from '../support/problem.ts';

describe('an account email is exactly one mailbox', () => {
  let ctx: TestContext;
  let ipCounter = 0;
  before(async () => {
    ctx = await createTestApp();
  });
  after(() => ctx.close());

  const register = (email: string, name = 'Someone') =>
    ctx.app.inject({
      method: 'POST',
      url: '/api/auth/register',
      headers: { origin: PUBLIC_URL },
      remoteAddress: `198.51.100.${++ipCounter}`,
      payload: { email, password: 'long enough password', name },
    });

  test('addresses a mail library would read as a list or a display name are 400, and nobody is mailed', async () => {
    // Regression: "a,victim@example.org" was accepted and nodemailer sent the confirmation to victim@example.org.
    const hostile = [
      'a,victim@example.org',
      'x<victim@example.org>',
      'x <victim@example.org>',
      'a;victim@example.org',
      '"a"@example.org',
      'a:b@example.org',
      'a(comment)@example.org',
      'a\\b@example.org',
      'a[1]@example.org',
      'a\tb@example.org',
      'a\u0085b@example.org',
      'a@example.org,victim@example.org',
      'a@exa mple.org',
      'a@[127.0.0.1]',
      'a@localhost',
      'a..b@example.org',
      '.a@example.org',
      'a.@example.org',
      'a@-example.org',
      'a@example.123',
      `${'a'.repeat(65)}@example.org`,
      `a@${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(63)}.${'e'.repeat(60)}.org`,
    ];
    for (const email of hostile) assertProblem(await register(email), 400, 'invalid_request');
    await settled(ctx);
    assert.equal(ctx.smtp.messages.length, 0, 'no mail at all');
  });

  test('ordinary addresses are accepted, and the mail is delivered to exactly that address', async () => {
    const accepted = ['Plain.Person+tag@Example.ORG', "o'brien@example.ie", 'x_y-z@sub.example.co.uk', `${'a'.repeat(64)}@example.org`, 'user@bücher.example'];
    for (const email of accepted) {
      const response = await register(email);
      assert.equal(response.statusCode, 201, `${email}: ${response.body}`);
    }
    await settled(ctx);
    const mail = ctx.smtp.messages.find((message) => message.to.includes('plain.person+tag@example.org'));
    assert.ok(mail, 'the confirmation mail');
    assert.deepEqual(mail.rcptTo, ['plain.person+tag@example.org']);
  });

  test('a name with a line break or a control character is 400; a name with commas and brackets is mailed safely', async () => {
    for (const name of ['Eve\r\nBcc: victim@example.org', 'Eve\nSecond line', 'Eve\u0000', 'Eve\u202Egnp.exe', 'Eve\u2028Second line']) {
      assertProblem(await register(`name-${ipCounter}@example.org`, name), 400, 'invalid_request');
    }
    const user = await registerUser(ctx, { name: 'Doe, John <john@victim.example.org>' });
    await settled(ctx);
    const mail = ctx.smtp.to(user.email).at(-1);
    assert.ok(mail);
    assert.deepEqual(mail.rcptTo, [user.email]);
    assert.match(mail.text, /^Hello Doe, John <john@victim\.example\.org>,$/m);
    assert.ok(ctx.smtp.messages.every((message) => message.rcptTo?.every((address) => !address.includes('victim'))), 'nobody else was mailed');
  });
});

test('isDeliverableAddress: lengths of RFC 5321', () => {
  assert.ok(isDeliverableAddress(`${'a'.repeat(64)}@example.org`));
  assert.ok(!isDeliverableAddress(`${'a'.repeat(65)}@example.org`));
  const domain = `${'d'.repeat(63)}.${'d'.repeat(63)}.${'d'.repeat(63)}.${'d'.repeat(56)}.org`;
  assert.equal(`a@${domain}`.length, 254);
  assert.ok(isDeliverableAddress(`a@${domain}`));
  assert.ok(!isDeliverableAddress(`ab@${domain}`));
  assert.ok(!isDeliverableAddress(`a@${'d'.repeat(64)}.org`));
});
