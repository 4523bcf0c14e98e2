import { strict as assert } from 'node:assert';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { eventually, freePort, launchBrowser, newContext, startLiveApp, watchConsole, type LiveApp } from '../support/browser.ts';
import { linkIn, readOutbox } from '../support/mail.ts';

const example = fileURLToPath(new URL('../../examples/receiver.js', import.meta.url));
const tls = (name: string) => fileURLToPath(new URL(`../support/tls/${name}`, import.meta.url));

/**
 * Issue 28's "done when": a new user, in Chromium, signs up and follows the
 * getting-started checklist (confirm the address from the mail file, a test
 * card from the screen, an API key, an endpoint at a local HTTPS receiver,
 * a machine) to a running machine whose `machine.created` the
 * example receiver (docs/webhooks.md) verifies. Every step is one the screen shows: the test
 * clicks the checklist's own links and reads the card number from the page.
 * Billing is on, as on a fresh `npm start`.
 */
describe('dashboard in Chromium: a new user’s first hour, by the checklist', () => {
  let live: LiveApp;
  let browser: Browser;
  let page: Page;
  let receiver: ChildProcess | undefined;
  const received: Array<{ id: string; type: string }> = [];
  const problems: string[] = [];
  const email = 'first-hour@example.com';

  before(async () => {
    browser = await launchBrowser();
    // As `npm start` runs: billing on, mail as .eml files; real time and a short boot.
    live = await startLiveApp({ realClock: true, env: { BILLING: 'on', SMTP_URL: '', MACHINE_BOOT_MS: '300', JOBS_POLL_INTERVAL_MS: '100' } });
    const context = await newContext(browser, { viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    problems.push(...watchConsole(page));
  });
  after(async () => {
    receiver?.kill();
    await browser?.close();
    await live?.close();
  });

  const checklist = () => page.locator('#get-started');
  const step = (id: string) => checklist().locator(`li[data-step="${id}"]`);
  /** Home, as the brand and the Machines link lead there, once the checklist has drawn. */
  const home = async () => {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Machines' }).click();
    await page.waitForURL(`${live.baseUrl}/machines`);
    await page.getByRole('heading', { name: 'Your machines' }).waitFor();
  };
  const nextStep = async () => {
    await checklist().locator('.steps__item--next').waitFor();
    return checklist().locator('.steps__item--next').getAttribute('data-step');
  };

  test('sign up → the checklist → confirm → card → API key → endpoint → a running machine, its machine.created verified by examples/receiver.js', async (t) => {
    await t.test('sign up: home shows the checklist, and no banner says anything was stopped', async () => {
      await page.goto(`${live.baseUrl}/sign-up`);
      await page.getByLabel('Your name').fill('Ada First');
      await page.getByLabel('Email address').fill(email);
      await page.getByLabel('Password').fill('correct horse battery');
      await page.getByRole('button', { name: 'Create account' }).click();
      await page.waitForURL(`${live.baseUrl}/machines`);
      await checklist().getByRole('heading', { name: 'Get started' }).waitFor();
      assert.deepEqual(await checklist().locator('li').evaluateAll((items) => items.map((item) => item.getAttribute('data-step'))), ['email', 'card', 'api-key', 'endpoint', 'machine']);
      await checklist().getByText('0 of 5 done').waitFor();
      assert.equal(await nextStep(), 'email');
      assert.doesNotMatch(await page.locator('body').innerText(), /stopped|balance is empty/i);
    });

    await t.test('confirm the address: the hint says where mail goes without a mail server; the link is in the newest .eml file', async () => {
      await step('email').getByText('writes each mail as a file into its mail folder').waitFor();
      const mail = await eventually(async () => (await readOutbox(live.config.mailDir)).find((candidate) => candidate.to.includes(email)), 'the confirmation mail file');
      await page.goto(linkIn(mail, '/verify-email').url);
      await page.getByRole('button', { name: 'Confirm email address' }).click();
      await page.getByRole('link', { name: 'Continue to the dashboard' }).click();
      await page.waitForURL(`${live.baseUrl}/machines`);
      await step('email').and(page.locator('[data-done="true"]')).waitFor();
      assert.equal(await nextStep(), 'card');
    });

    await t.test('before a card, the create dialog names the missing step, and so does the 402 if one tries anyway', async () => {
      await page.getByRole('button', { name: 'Create machine', exact: true }).click();
      const dialog = page.getByRole('dialog', { name: 'Create machine' });
      const warning = dialog.locator('[data-next-step]');
      await warning.getByText('Your balance is empty, so a new machine would be refused.').waitFor();
      assert.match(await warning.innerText(), /Add a card on the Billing page: your \$10\.00 welcome credit then arrives at once/);
      await dialog.getByLabel('Name').fill('too-early');
      await dialog.getByRole('button', { name: 'Create machine' }).click();
      await dialog.getByRole('alert').getByText('The balance is empty. Your email address is confirmed: add a card').waitFor();
      await dialog.getByRole('button', { name: 'Cancel' }).click();
      await dialog.waitFor({ state: 'detached' });
    });

    await t.test('add a card: the checklist links to Billing, whose test-mode notice gives the number', async () => {
      await step('card').getByRole('link', { name: 'Add a card' }).click();
      await page.waitForURL(`${live.baseUrl}/billing#card`);
      const notice = await page.locator('[data-test-mode]').innerText();
      const number = /Use (\d{4} \d{4} \d{4} \d{4})/.exec(notice)?.[1];
      assert.ok(number, `a test card on the screen: ${notice}`);
      const form = page.getByRole('form', { name: 'Add card' });
      await form.getByLabel('Card number').fill(number);
      await form.getByLabel('Expiry month').fill('12');
      await form.getByLabel('Expiry year').fill(String(new Date().getFullYear() + 2));
      await form.getByLabel('CVC').fill('123');
      await form.getByRole('button', { name: 'Save card' }).click();
      await page.locator('[data-welcome="granted"]').getByText('Your welcome credit of $10.00 arrived').waitFor();
      assert.equal(await page.locator('[data-balance]').textContent(), '$10.00');
      assert.equal(await page.getByRole('form', { name: 'Replace card' }).count(), 0, 'the card form folded away');
      await home();
      await step('card').and(page.locator('[data-done="true"]')).waitFor();
      assert.equal(await nextStep(), 'api-key');
    });

    await t.test('create an API key from the checklist’s link', async () => {
      await step('api-key').getByRole('link', { name: 'Create an API key' }).click();
      await page.waitForURL(`${live.baseUrl}/account/api-keys`);
      await page.getByRole('button', { name: 'Create API key' }).click();
      const dialog = page.getByRole('dialog', { name: 'Create API key' });
      await dialog.getByLabel('Name').fill('First script');
      await dialog.getByRole('button', { name: 'Create key' }).click();
      assert.match(await dialog.getByRole('textbox', { name: 'API key' }).inputValue(), /^tmk_/);
      await dialog.getByRole('button', { name: 'Done' }).click();
      await home();
      assert.equal(await nextStep(), 'endpoint');
    });

    await t.test('add an endpoint at a local HTTPS receiver, start examples/receiver.js with its secret, and send a test event', async () => {
      await step('endpoint').getByRole('link', { name: 'Add an endpoint' }).click();
      await page.waitForURL(`${live.baseUrl}/event-webhooks`);
      await page.getByRole('button', { name: 'Add endpoint' }).click();
      const dialog = page.getByRole('dialog', { name: 'Add endpoint' });
      const port = await freePort();
      await dialog.getByRole('textbox', { name: 'Endpoint URL' }).fill(`https://127.0.0.1:${port}/hooks`);
      await dialog.getByLabel('Description').fill('My laptop');
      await dialog.getByRole('button', { name: 'Add endpoint' }).click();
      const secret = await dialog.getByRole('textbox', { name: 'Signing secret' }).inputValue();
      receiver = spawn(process.execPath, [example], {
        env: { PATH: process.env.PATH ?? '', WEBHOOK_SECRET: secret, TLS_KEY: tls('server.key'), TLS_CERT: tls('server.pem'), PORT: String(port) },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      receiver.stdout!.on('data', (chunk: Buffer) => received.push(...chunk.toString().trim().split('\n').map((line) => JSON.parse(line))));
      await new Promise<void>((resolve) => receiver!.stderr!.once('data', () => resolve()));
      await dialog.getByRole('link', { name: 'View endpoint' }).click();
      await page.getByRole('heading', { level: 1, name: 'My laptop' }).waitFor();
      await page.getByRole('button', { name: 'Send test event' }).click();
      await page.locator('#test-result', { hasText: 'Test event delivered.' }).waitFor();
      await eventually(() => (received.some((event) => event.type === 'webhook.test') ? true : undefined), 'the test event at the receiver');
      await home();
      assert.equal(await nextStep(), 'machine');
    });

    await t.test('create the first machine from the checklist: it runs, the checklist is done and goes, and machine.created reaches the receiver verified', async () => {
      await step('machine').getByRole('button', { name: 'Create your first machine' }).click();
      const dialog = page.getByRole('dialog', { name: 'Create machine' });
      await dialog.getByRole('combobox', { name: 'Size' }).locator('option[value="small"]', { hasText: '$0.05/h' }).waitFor({ state: 'attached' });
      assert.equal(await dialog.locator('[data-next-step]').count(), 0, 'with the welcome credit, nothing is missing');
      await dialog.getByLabel('Name').fill('first-machine');
      await dialog.getByRole('button', { name: 'Create machine' }).click();
      assert.match(await dialog.getByRole('textbox', { name: 'MCP token' }).inputValue(), /^tmm_/);
      await dialog.getByRole('button', { name: 'Done' }).click();
      const row = page.locator('tr[data-status="running"]', { has: page.locator('.table__primary', { hasText: 'first-machine' }) });
      await row.waitFor({ timeout: 10_000 });
      await checklist().waitFor({ state: 'detached' });
      const machineId = await row.getAttribute('data-machine-id');

      const created = await eventually(() => received.find((event) => event.type === 'machine.created'), 'machine.created at the receiver', 10_000);
      // The receiver logs only events whose signature checked out; the dashboard shows the same delivery, named.
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Event webhooks' }).click();
      await page.getByRole('link', { name: /127\.0\.0\.1/ }).click();
      const delivery = page.locator('tr[data-status="delivered"]', { has: page.locator('[data-subject="first-machine"]') });
      await delivery.getByText('machine.created').waitFor();
      assert.equal(await delivery.locator('[data-subject]').getAttribute('title'), machineId);
      assert.match(created.id, /^evt_/);
    });
  });

  test('no page error or CSP violation on the way', () => {
    assert.deepEqual(problems, []);
  });
});
