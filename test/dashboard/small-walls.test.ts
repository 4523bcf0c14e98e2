import { strict as assert } from 'node:assert';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { asBearer, asSession, createApiKey, registerUser, settled, type TestUser } from '../support/app.ts';
import { launchBrowser, newContext, startLiveApp, useSession, watchConsole, type LiveApp } from '../support/browser.ts';
import { createMachine, finishBoot, newOwner, pathOf, type Owner } from '../support/machines.ts';
import { confirmEmail } from '../billing/helpers.ts';
import { PUBLIC_DIR } from '../../src/dashboard/assets.ts';
import type { ProviderMachine } from '../../src/providers/provider.ts';

/** The viewport of issue 38's run: a laptop's browser window. */
const VIEWPORT = { width: 1280, height: 860 };

/**
 * Issue 38 point 8, the small walls a new user met in the dashboard, in
 * Chromium: a balance banner that outlived the card that ended it, a mail
 * folder the checklist got wrong, two resend buttons on home, "per second"
 * where the meter counts milliseconds, a live view whose status line fell
 * below the fold (and whose hidden picture stayed on screen), and no favicon.
 */
describe('dashboard in Chromium: issue 38’s small walls', () => {
  let browser: Browser;
  const problems: string[] = [];

  before(async () => {
    browser = await launchBrowser();
  });
  after(() => browser?.close());

  async function openPage(live: LiveApp, user: TestUser): Promise<Page> {
    const context = await newContext(browser, { viewport: VIEWPORT });
    await useSession(context, live, user.session);
    const page = await context.newPage();
    problems.push(...watchConsole(page));
    return page;
  }

  describe('billing on, mail through SMTP', () => {
    let live: LiveApp;
    let user: TestUser;
    let page: Page;

    before(async () => {
      live = await startLiveApp({ env: { BILLING: 'on' } });
      user = await registerUser(live);
      await confirmEmail(live, user);
      page = await openPage(live, user);
    });
    after(() => live?.close());

    test('the "Machines need a balance" banner goes when "Save card" brings the welcome credit, without a reload (it stayed until one)', async () => {
      await page.goto(`${live.baseUrl}/billing`);
      const banner = page.locator('#balance-banner');
      await banner.getByText('Machines need a balance.').waitFor();
      await page.evaluate(() => void ((window as unknown as { notReloaded: boolean }).notReloaded = true));

      const form = page.getByRole('form', { name: 'Add card' });
      await form.getByLabel('Card number').fill('4242 4242 4242 4242');
      await form.getByLabel('Expiry month').fill('12');
      await form.getByLabel('Expiry year').fill(String(new Date().getFullYear() + 2));
      await form.getByLabel('CVC').fill('123');
      await form.getByRole('button', { name: 'Save card' }).click();
      await page.locator('[data-welcome="granted"]').getByText('Your welcome credit of $10.00 arrived').waitFor();
      await banner.waitFor({ state: 'detached' });
      assert.equal(await page.evaluate(() => (window as unknown as { notReloaded?: boolean }).notReloaded), true, 'the same page, not reloaded');
    });

    test('"per millisecond", never "per second": the Billing page, the create dialog and the welcome mail (the meter counts milliseconds)', async () => {
      await page.goto(`${live.baseUrl}/billing`);
      await page.getByText('No machine time in the last 30 days').waitFor();
      const billing = await page.locator('body').innerText();
      assert.doesNotMatch(billing, /per second/i);
      assert.match(billing, /metered per millisecond/);

      await page.goto(`${live.baseUrl}/machines`);
      await page.getByRole('button', { name: 'Create machine', exact: true }).click();
      const dialog = page.getByRole('dialog', { name: 'Create machine' });
      await dialog.getByText('Charged per millisecond while it runs.').waitFor();
      assert.doesNotMatch(await dialog.innerText(), /per second/i);

      await settled(live);
      const welcome = live.smtp.to(user.email).find((mail) => mail.subject === 'Your welcome credit has arrived');
      assert.ok(welcome, 'the welcome mail');
      assert.doesNotMatch(welcome.text, /per second/i);
      assert.match(welcome.text, /metered per millisecond/);
    });

    test('GET /api/dashboard/mail says only "smtp" when mail goes through SMTP: nothing of its URL or host', async () => {
      const answer = await live.app.inject({ method: 'GET', url: '/api/dashboard/mail', headers: asSession(user.session, live.baseUrl) });
      assert.equal(answer.statusCode, 200, answer.body);
      assert.deepEqual(answer.json(), { delivery: 'smtp' });
    });
  });

  describe('mail written to files in the MAIL_DIR given', () => {
    let live: LiveApp;
    let user: TestUser;
    let page: Page;
    let mailDir: string;

    before(async () => {
      mailDir = join(await mkdtemp(join(tmpdir(), 'small-walls-')), 'outbox of this test');
      live = await startLiveApp({ env: { SMTP_URL: '', MAIL_DIR: mailDir } });
      user = await registerUser(live);
      page = await openPage(live, user);
    });
    after(() => live?.close());

    const emailStep = () => page.locator('#get-started li[data-step="email"]');

    test('the checklist names the mail folder MAIL_DIR says (it said ./data/mail whatever MAIL_DIR said)', async () => {
      await page.goto(`${live.baseUrl}/machines`);
      const hint = emailStep().locator('.steps__hint');
      await hint.waitFor();
      assert.equal(await hint.locator('[data-mail-folder]').textContent(), mailDir);
      assert.doesNotMatch(await hint.innerText(), /data\/mail/);
    });

    test('home shows one resend control, the checklist’s; the banner keeps its text (both showed a button)', async () => {
      await page.goto(`${live.baseUrl}/machines`);
      await emailStep().getByRole('button', { name: 'Send the link again' }).waitFor();
      await page.locator('#confirmation-banner').getByText('Confirm your email address.').waitFor();
      assert.equal(await page.getByRole('button', { name: /Resend confirmation email|Send the link again/ }).count(), 1);
    });

    test('GET /api/dashboard/mail: the folder, for the dashboard’s session only', async () => {
      const answer = await live.app.inject({ method: 'GET', url: '/api/dashboard/mail', headers: asSession(user.session, live.baseUrl) });
      assert.equal(answer.statusCode, 200, answer.body);
      assert.deepEqual(answer.json(), { delivery: 'files', folder: mailDir });
      const key = await createApiKey(live, user);
      assert.equal((await live.app.inject({ method: 'GET', url: '/api/dashboard/mail', headers: asBearer(key) })).statusCode, 403);
      assert.equal((await live.app.inject({ method: 'GET', url: '/api/dashboard/mail' })).statusCode, 401);
    });
  });

  describe('the live view and the favicon', () => {
    let live: LiveApp;

    before(async () => {
      live = await startLiveApp({
        env: { MACHINE_BOOT_MS: '1000' },
        // The simulated picture is 1024×640 whatever the machine; a real one is the machine's screen size (1280×800 by default).
        setup: (app) => {
          app.machineProvider.screen = async (machine: ProviderMachine) => {
            const { width, height } = machine.screen;
            const body = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}"><rect width="${width}" height="${height}" fill="#1f6feb"/></svg>`;
            return { contentType: 'image/svg+xml', body: Buffer.from(body), width, height };
          };
        },
      });
    });
    after(() => live?.close());

    let owner: Owner;
    let machineId: string;
    let page: Page;

    /** A live-view link of a running machine, open at 1280×860, showing its picture. */
    async function openLiveView(): Promise<void> {
      owner = await newOwner(live);
      machineId = (await createMachine(owner, { name: 'watched' })).id;
      await finishBoot(live);
      const link = (await owner.call('POST', `/api/machines/${machineId}/live-view`)).json();
      page = await openPage(live, owner.user);
      await page.goto(`${live.baseUrl}${pathOf(link.url)}`);
      await page.locator('#state').getByText('Showing a picture of the screen').waitFor();
    }

    test('at 1280×860 the live view is one window high, the screen scaled into it and the status line on screen (it fell below the fold)', async () => {
      await openLiveView();
      const shown = (await page.locator('#picture').boundingBox())!;
      const status = (await page.locator('#state').boundingBox())!;
      assert.ok(status.y + status.height <= VIEWPORT.height, `the status line ends at ${status.y + status.height} px, within ${VIEWPORT.height}`);
      assert.ok(shown.y >= 0 && shown.y + shown.height <= status.y, `the picture (${shown.y}–${shown.y + shown.height} px) is above the status line`);
      assert.equal(await page.evaluate(() => document.documentElement.scrollHeight <= window.innerHeight), true, 'nothing to scroll');
    });

    test('once the link ends the picture, hidden, is gone from the screen (a display rule kept showing it)', async () => {
      assert.equal((await owner.call('DELETE', `/api/machines/${machineId}/live-view`)).statusCode, 204);
      // The next refresh (every 3 s) finds the link gone.
      await page.locator('main[data-state="ended"]').waitFor({ timeout: 10_000 });
      const picture = page.locator('#picture');
      assert.equal(await picture.getAttribute('hidden'), '');
      assert.equal(await picture.isVisible(), false);
    });

    test('/favicon.ico is the dashboard’s SVG icon, as image/svg+xml (it was a 404)', async () => {
      const context = await newContext(browser);
      const response = await context.request.get(`${live.baseUrl}/favicon.ico`);
      assert.equal(response.status(), 200);
      assert.equal(response.headers()['content-type'], 'image/svg+xml');
      assert.deepEqual(await response.body(), await readFile(join(PUBLIC_DIR, 'favicon.svg')));
      await context.close();
    });
  });

  test('no page error or CSP violation on the way', () => {
    assert.deepEqual(problems, []);
  });
});
