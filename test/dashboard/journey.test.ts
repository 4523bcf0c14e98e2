import { strict as assert } from 'node:assert';
import { createHmac } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { eventually, launchBrowser, newContext, startLiveApp, watchConsole, type LiveApp } from '../support/browser.ts';
import { linkIn, readOutbox } from '../support/mail.ts';
import { startReceiver, type Receiver } from '../support/receiver.ts';

/** v1 = HMAC-SHA256(secret, `${t}.${body}`) (CONTRACT 11). */
function signedWith(secret: string, header: string | string[] | undefined, body: string): boolean {
  const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(header));
  return match !== null && createHmac('sha256', secret).update(`${match[1]}.${body}`).digest('hex') === match[2];
}

/** The API calls a page made, as "METHOD /path". */
function recordRequests(page: Page): string[] {
  const seen: string[] = [];
  page.on('request', (request) => {
    const url = new URL(request.url());
    if (url.pathname.startsWith('/api/')) seen.push(`${request.method()} ${url.pathname}`);
  });
  return seen;
}

/**
 * Issue 5's "done when", in one go and through the UI only: a new user signs
 * up, confirms the address from the mail file, signs out and in, creates an
 * API key and uses it, runs an event webhook endpoint against a local HTTPS
 * receiver from creation to deletion, then resets the password from a second
 * browser, which signs the first one out.
 */
describe('dashboard in Chromium: a new user’s journey', () => {
  let live: LiveApp;
  let browser: Browser;
  let receiver: Receiver;
  const problems: string[] = [];
  const email = 'grace@example.com';
  const password = 'correct horse battery';
  const newPassword = 'a fresh passphrase for grace';

  before(async () => {
    browser = await launchBrowser();
    // No SMTP_URL: mail is written as .eml files, and the links come from those files.
    live = await startLiveApp({ env: { SMTP_URL: '' } });
    receiver = await startReceiver(() => ({ status: 200, headers: { 'content-type': 'application/json' }, body: '{"received":true}' }));
  });
  after(async () => {
    await browser?.close();
    await receiver?.close();
    await live?.close();
  });

  const linkFromMail = (subject: string, path: '/verify-email' | '/reset-password') =>
    eventually(async () => {
      const mail = (await readOutbox(live.config.mailDir)).filter((candidate) => candidate.to.includes(email) && candidate.subject === subject).at(-1);
      if (!mail) return undefined;
      const url = new URL(linkIn(mail, path).url);
      assert.equal(url.origin, live.baseUrl, 'the emailed link points at the dashboard');
      return url;
    }, `mail "${subject}"`);

  test('sign up → confirm → sign out and in → API key → endpoint: test, deliveries, pause, rotate, delete → reset from a second browser', async (t) => {
    const home = await newContext(browser);
    await home.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: live.baseUrl });
    const page = await home.newPage();
    problems.push(...watchConsole(page));
    const requests = recordRequests(page);

    await t.test('sign up in the UI', async () => {
      await page.goto(`${live.baseUrl}/sign-up`);
      await page.getByLabel('Your name').fill('Grace Hopper');
      await page.getByLabel('Email address').fill(email);
      await page.getByLabel('Password').fill(password);
      await page.getByRole('button', { name: 'Create account' }).click();
      await page.waitForURL(`${live.baseUrl}/machines`);
      await page.locator('#confirmation-banner').getByText('Confirm your email address.').waitFor();
    });

    await t.test('open the confirmation link from the mail file: nothing is sent until the button is pressed, then the token leaves the address bar', async () => {
      const link = await linkFromMail('Confirm your email address', '/verify-email');
      requests.length = 0;
      await page.goto(link.href);
      await page.getByRole('button', { name: 'Confirm email address' }).waitFor();
      await page.waitForLoadState('networkidle');
      assert.deepEqual(requests.filter((request) => request.startsWith('POST')), [], 'opening the link POSTs nothing');
      await page.getByRole('button', { name: 'Confirm email address' }).click();
      await page.getByRole('heading', { name: 'Email address confirmed' }).waitFor();
      assert.deepEqual(requests.filter((request) => request.startsWith('POST')), ['POST /api/auth/verify']);
      assert.equal(page.url(), `${live.baseUrl}/verify-email`, 'the used token is gone from the address bar');
      await page.getByRole('link', { name: 'Continue to the dashboard' }).click();
      await page.waitForURL(`${live.baseUrl}/machines`);
      assert.equal(await page.locator('#confirmation-banner').count(), 0);
      await page.goBack();
      await page.getByRole('heading', { name: 'Email address confirmed' }).waitFor();
      assert.equal(page.url(), `${live.baseUrl}/verify-email`, 'nor is it in the history');
    });

    await t.test('sign out, and sign in again', async () => {
      await page.goto(`${live.baseUrl}/machines`);
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByText('You are signed out.').waitFor();
      await page.getByLabel('Email address').fill(email);
      await page.getByLabel('Password', { exact: true }).fill(password);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForURL(`${live.baseUrl}/machines`);
    });

    await t.test('create an API key in the UI and use it in a Bearer request', async () => {
      await page.getByRole('link', { name: 'Account' }).click();
      await page.getByRole('link', { name: 'API keys' }).click();
      await page.getByRole('button', { name: 'Create API key' }).click();
      const dialog = page.getByRole('dialog', { name: 'Create API key' });
      await dialog.getByLabel('Name').fill('Journey script');
      await dialog.getByRole('button', { name: 'Create key' }).click();
      const key = await dialog.getByRole('textbox', { name: 'API key' }).inputValue();
      await dialog.getByRole('button', { name: 'Copy API key' }).click();
      assert.equal(await page.evaluate(() => navigator.clipboard.readText()), key);
      await dialog.getByRole('button', { name: 'Done' }).click();
      const me = await fetch(`${live.baseUrl}/api/me`, { headers: { authorization: `Bearer ${key}` } });
      assert.equal(me.status, 200);
      assert.equal((await me.json()).account.email, email);
      assert.ok(!(await page.content()).includes(key), 'the key left with its dialog');
    });

    let secret = '';
    await t.test('create an endpoint pointed at a local HTTPS receiver: the secret shown once', async () => {
      await page.getByRole('link', { name: 'Event webhooks' }).click();
      await page.getByText('No endpoints yet').waitFor();
      await page.getByRole('button', { name: 'Add endpoint' }).click();
      const dialog = page.getByRole('dialog', { name: 'Add endpoint' });
      await dialog.getByRole('textbox', { name: 'Endpoint URL' }).fill(receiver.url);
      await dialog.getByLabel('Description').fill('Journey receiver');
      await dialog.getByRole('button', { name: 'Add endpoint' }).click();
      secret = await dialog.getByRole('textbox', { name: 'Signing secret' }).inputValue();
      assert.match(secret, /^whsec_/);
      await dialog.getByRole('link', { name: 'View endpoint' }).click();
      await page.getByRole('heading', { level: 1, name: 'Journey receiver' }).waitFor();
      assert.ok(!(await page.content()).includes(secret));
    });

    await t.test('send a test event and see it delivered in the deliveries view', async () => {
      await page.getByRole('button', { name: 'Send test event' }).click();
      await page.locator('#test-result', { hasText: 'Test event delivered.' }).waitFor();
      const [delivery] = await receiver.waitFor(1);
      assert.ok(signedWith(secret, delivery!.headers['service-signature'], delivery!.body), 'signed with the secret shown');
      const row = page.locator(`#deliveries tr[data-delivery-id="${delivery!.headers['service-delivery']}"][data-status="delivered"]`);
      await row.waitFor();
      assert.match(await row.innerText(), /webhook\.test[\s\S]*Delivered[\s\S]*HTTP 200/);
    });

    await t.test('pause it', async () => {
      await page.getByRole('button', { name: 'Pause' }).click();
      await page.getByRole('button', { name: 'Resume' }).waitFor();
      await page.getByText('This endpoint is paused').waitFor();
      await page.locator('#settings').getByText('Paused', { exact: true }).waitFor();
    });

    await t.test('rotate its secret: the new one is shown once and signs the next test', async () => {
      await page.getByRole('button', { name: 'Rotate secret' }).click();
      await page.getByRole('dialog', { name: 'Rotate signing secret?' }).getByRole('button', { name: 'Rotate secret' }).click();
      const dialog = page.getByRole('dialog', { name: 'New signing secret' });
      const rotated = await dialog.getByRole('textbox', { name: 'Signing secret' }).inputValue();
      assert.notEqual(rotated, secret);
      await dialog.getByRole('button', { name: 'Done' }).click();
      assert.ok(!(await page.content()).includes(rotated));
      await page.getByRole('button', { name: 'Send test event' }).click();
      await page.locator('#test-result', { hasText: 'Test event delivered.' }).waitFor();
      const [, second] = await receiver.waitFor(2);
      assert.ok(signedWith(rotated, second!.headers['service-signature'], second!.body), 'signed with the new secret');
      assert.ok(!signedWith(secret, second!.headers['service-signature'], second!.body), 'not with the old one');
    });

    await t.test('delete it after confirming', async () => {
      await page.getByRole('button', { name: 'Delete endpoint' }).click();
      await page.getByRole('dialog', { name: 'Delete endpoint?' }).getByRole('button', { name: 'Delete endpoint' }).click();
      await page.waitForURL(`${live.baseUrl}/event-webhooks`);
      await page.getByText(`Endpoint ${receiver.url} deleted.`).waitFor();
      await page.getByText('No endpoints yet').waitFor();
    });

    await t.test('forgot and reset in a second browser: nothing is sent until the button is pressed, and the first browser is signed out', async () => {
      const phone = await newContext(browser);
      const phonePage = await phone.newPage();
      problems.push(...watchConsole(phonePage));
      const phoneRequests = recordRequests(phonePage);
      await phonePage.goto(`${live.baseUrl}/sign-in`);
      await phonePage.getByRole('link', { name: 'Forgot password?' }).click();
      await phonePage.getByLabel('Email address').fill(email);
      await phonePage.getByRole('button', { name: 'Send reset link' }).click();
      await phonePage.getByRole('heading', { name: 'Check your email' }).waitFor();

      const link = await linkFromMail('Reset your password', '/reset-password');
      phoneRequests.length = 0;
      await phonePage.goto(link.href);
      await phonePage.getByLabel('New password', { exact: true }).waitFor();
      await phonePage.waitForLoadState('networkidle');
      assert.deepEqual(phoneRequests.filter((request) => request.startsWith('POST')), [], 'opening the link POSTs nothing');
      await phonePage.getByLabel('New password', { exact: true }).fill(newPassword);
      await phonePage.getByLabel('Repeat the new password').fill(newPassword);
      await phonePage.getByRole('button', { name: 'Set new password' }).click();
      await phonePage.waitForURL(`${live.baseUrl}/machines`);
      assert.deepEqual(phoneRequests.filter((request) => request.startsWith('POST')), ['POST /api/auth/reset']);
      await phonePage.getByText('Every other session was signed out.').waitFor();
      await phonePage.goBack();
      assert.doesNotMatch(phonePage.url(), /token=/, 'the used reset link is not in the history');

      await page.reload();
      await page.waitForURL(/\/sign-in\?next=/);
      await page.getByLabel('Email address').fill(email);
      await page.getByLabel('Password', { exact: true }).fill(newPassword);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForURL(`${live.baseUrl}/event-webhooks`);
      await phone.close();
    });
    await home.close();
  });

  test('no page error or CSP violation on the way', () => {
    assert.deepEqual(problems, []);
  });
});
