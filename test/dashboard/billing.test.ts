import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { asSession, settled as jobsSettled, type TestUser } from '../support/app.ts';
import { eventually, openSignedInPage, type LiveApp, type SignedInPage } from '../support/browser.ts';
import { linkIn } from '../support/mail.ts';
import { BOOT_MS } from '../support/machines.ts';
import { layoutProblems, settled } from './page-audits.ts';

/**
 * Issue 11's dashboard journey, in Chromium: the Billing page shows what the
 * welcome credit waits for; a card is added in the test-mode form; confirming
 * the address brings the credit; a top-up; a machine's time in the usage
 * list; the banner when the balance runs low. At 375 px too.
 */
describe('dashboard in Chromium: billing', () => {
  let live: LiveApp;
  let user: TestUser;
  let page: Page;
  let problems: string[];
  let ui: SignedInPage;

  before(async () => {
    ui = await openSignedInPage({ app: { env: { BILLING: 'on', MACHINE_BOOT_MS: String(BOOT_MS), MACHINE_PRICES: 'small=0.05,medium=0.10,large=36' } }, user: { email: 'billing-journey@example.com' } });
    ({ live, user, page, problems } = ui);
  });
  after(() => ui?.close());

  const call = (method: 'GET' | 'POST', url: string, payload?: object) =>
    live.app.inject({ method, url, headers: asSession(user.session, live.baseUrl), ...(payload ? { payload } : {}) });
  const balanceText = () => page.locator('[data-balance]').textContent();

  test('the checklist, adding a card in test mode, the welcome credit after confirmation, a top-up', async () => {
    await page.goto(`${live.baseUrl}/billing`);
    await page.getByRole('heading', { name: 'Billing', level: 1 }).waitFor();
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Billing', exact: true }).waitFor();
    assert.equal(await balanceText(), '$0.00');
    const checklist = page.getByRole('list', { name: 'Welcome credit checklist' });
    assert.deepEqual(await checklist.locator('li').allTextContents(), ['To do Confirm your email address', 'To do Add a card']);
    await page.locator('[data-test-mode]').getByText('Test mode:').waitFor();
    // A new account is told its next step, not that its machines were stopped (it never had one).
    const banner = page.locator('#balance-banner');
    await banner.getByText('Machines need a balance.').waitFor();
    assert.doesNotMatch(await banner.innerText(), /empty|stopped/);

    // A declined card: the form says so, nothing is saved.
    const form = page.getByRole('form', { name: 'Add card' });
    await form.getByLabel('Card number').fill('4000 0000 0000 0002');
    await form.getByLabel('Expiry month').fill('12');
    await form.getByLabel('Expiry year').fill('2030');
    await form.getByLabel('CVC').fill('123');
    await form.getByRole('button', { name: 'Save card' }).click();
    await form.getByRole('alert').getByText('The card was declined').waitFor();

    await form.getByLabel('Card number').fill('4242 4242 4242 4242');
    await form.getByRole('button', { name: 'Save card' }).click();
    await page.locator('[data-card="4242"]').getByText('Visa •••• 4242').waitFor();
    assert.deepEqual(await checklist.locator('li').allTextContents(), ['To do Confirm your email address', 'Done Add a card']);
    assert.ok(!(await page.content()).includes('4242 4242 4242 4242') || (await page.content()).includes('Use 4242 4242 4242 4242'), 'the number left with the form');
    // Saved: the form folds away (it stayed open), and opens again empty to replace the card.
    assert.equal(await page.getByRole('form', { name: 'Replace card' }).count(), 0, 'the card form is collapsed');
    await page.getByRole('button', { name: 'Change card' }).click();
    assert.equal(await page.getByRole('form', { name: 'Replace card' }).getByLabel('Card number').inputValue(), '');
    await page.getByRole('button', { name: 'Change card' }).click();
    assert.equal(await page.getByRole('form', { name: 'Replace card' }).count(), 0);

    // The confirmation link from the mail, opened in the browser.
    await jobsSettled(live);
    const mail = live.smtp.to(user.email).find((m) => m.subject === 'Confirm your email address');
    assert.ok(mail);
    await page.goto(linkIn(mail, '/verify-email').url);
    await page.getByRole('button', { name: 'Confirm email address' }).click();
    await page.getByRole('heading', { name: 'Email address confirmed' }).waitFor();
    await page.goto(`${live.baseUrl}/billing`);
    await page.locator('[data-welcome="granted"]').getByText('Your welcome credit of $10.00 arrived').waitFor();
    assert.equal(await balanceText(), '$10.00');
    await page.locator('tr[data-kind="welcome_credit"]').waitFor();
    assert.equal(await page.locator('#balance-banner').count(), 0, 'no banner with a balance');

    await page.getByRole('form', { name: 'Top up' }).getByLabel('Amount (USD)').fill('20.00');
    await page.getByRole('form', { name: 'Top up' }).getByRole('button', { name: 'Top up' }).click();
    await eventually(async () => ((await balanceText()) === '$30.00' ? true : undefined), 'the balance after the top-up');
    await page.locator('tr[data-kind="top_up"]').getByText('$20.00').waitFor();
    await jobsSettled(live);
    assert.ok(live.smtp.to(user.email).some((m) => m.subject === 'Your welcome credit has arrived'));
  });

  test('machine creation shows the price per hour of each size; the usage list shows a machine’s time; a low balance shows a banner', async () => {
    await page.goto(`${live.baseUrl}/machines`);
    await page.getByRole('button', { name: 'Create machine' }).click();
    const dialog = page.getByRole('dialog', { name: 'Create machine' });
    // The size is a choice, each with its price per hour (it was free text).
    const size = dialog.getByRole('combobox', { name: 'Size' });
    await dialog.locator('option[value="large"]', { hasText: '$36.00/h' }).waitFor({ state: 'attached' });
    assert.deepEqual(await size.locator('option').allTextContents(), ['small · $0.05/h', 'medium · $0.10/h', 'large · $36.00/h']);
    await dialog.getByLabel('Name').fill('metered-agent');
    await size.selectOption('large');
    await dialog.getByRole('button', { name: 'Create machine' }).click();
    await dialog.getByRole('button', { name: 'Done' }).click();
    live.clock.advance(BOOT_MS);
    await jobsSettled(live);
    // 45 minutes at 36 USD/h: 27 USD, leaving 3 USD, then the stop.
    for (let i = 0; i < 45; i++) {
      live.clock.advance(60_000);
      await jobsSettled(live);
    }
    const [machine] = (await call('GET', '/api/machines')).json().data;
    assert.equal((await call('POST', `/api/machines/${machine.id}/stop`)).statusCode, 200);
    await jobsSettled(live);

    await page.goto(`${live.baseUrl}/billing`);
    await settled(page);
    const row = page.locator(`#usage tr[data-machine-id="${machine.id}"]`);
    await row.getByText('metered-agent').waitFor();
    await row.getByText('45 min 0 s').waitFor();
    await row.getByText('$27.00').waitFor();
    assert.equal(await page.locator('[data-usage-total]').textContent(), '$27.00');
    assert.equal(await balanceText(), '$3.00');

    // Run it down below 1.00: the banner on every page.
    assert.equal((await call('POST', `/api/machines/${machine.id}/start`)).statusCode, 200);
    live.clock.advance(BOOT_MS);
    await jobsSettled(live);
    for (let i = 0; i < 4; i++) {
      live.clock.advance(60_000);
      await jobsSettled(live);
    }
    await page.goto(`${live.baseUrl}/machines`);
    await page.getByRole('region', { name: 'Balance' }).getByText('Your balance is low.').waitFor();
    assert.deepEqual(problems, []);
  });

  test('money to the cent with the exact amount on hover (it showed $9.999871 and −$0.00001); statement lines name their machine (they showed its id)', async () => {
    const [large] = (await call('GET', '/api/machines')).json().data;
    assert.equal((await call('POST', `/api/machines/${large.id}/stop`)).statusCode, 200);
    await jobsSettled(live);
    const before = (await call('GET', '/api/billing')).json().balance as string;
    const tiny = (await call('POST', '/api/machines', { name: 'tiny-agent', size: 'small' })).json();
    live.clock.advance(BOOT_MS);
    await jobsSettled(live);
    live.clock.advance(60_000);
    await jobsSettled(live);
    assert.equal((await call('POST', `/api/machines/${tiny.id}/stop`)).statusCode, 200);
    await jobsSettled(live);
    // A minute of small (0.05 USD/h), rounded up to the micro-dollar: 0.000834.
    const balance = (await call('GET', '/api/billing')).json().balance as string;
    assert.equal(Math.round((Number(before) - Number(balance)) * 1e6), 834);

    await page.goto(`${live.baseUrl}/billing`);
    await settled(page);
    const shown = page.locator('[data-balance] .money');
    assert.equal(await shown.textContent(), `$${Number(balance).toFixed(2)}`);
    assert.equal(await shown.getAttribute('title'), `$${balance.replace(/0+$/, '')} exactly`);
    const line = page.locator('#statement tr[data-kind="usage"]', { has: page.getByText('tiny-agent', { exact: true }) });
    assert.equal(await line.count(), 1, 'the line names its machine');
    const amount = line.locator('td[data-label="Amount"] .money');
    assert.equal(await amount.textContent(), '−<$0.01');
    assert.equal(await amount.getAttribute('title'), '−$0.000834 exactly');
    const name = line.getByRole('link', { name: 'tiny-agent' });
    assert.equal(await name.getAttribute('title'), tiny.id, 'the id on hover');
    assert.equal(await name.getAttribute('href'), `/machines/${tiny.id}`, "a link to the machine's page");
    assert.deepEqual(problems, []);
  });

  test("the statement: one line per machine per day, not a row per machine per minute (33 rows for two machines in 18 minutes); each line's exact amount on hover", async () => {
    const ledger = async () => (await call('GET', '/api/billing/transactions?limit=100')).json().data as Array<{ kind: string; machineId: string | null; amount: string }>;
    const machines: Array<{ id: string }> = [];
    for (const name of ['stmt-one', 'stmt-two']) machines.push((await call('POST', '/api/machines', { name, size: 'small' })).json() as { id: string });
    live.clock.advance(BOOT_MS);
    await jobsSettled(live);
    for (let i = 0; i < 18; i++) {
      live.clock.advance(60_000);
      await jobsSettled(live);
    }
    for (const machine of machines) assert.equal((await call('POST', `/api/machines/${machine.id}/stop`)).statusCode, 200);
    await jobsSettled(live);
    const entries = await ledger();
    const charges = entries.filter((entry) => entry.kind === 'usage' && machines.some((machine) => machine.id === entry.machineId));
    assert.ok(charges.length >= 36, `the ledger keeps its charge per machine per minute (${charges.length})`);

    await page.setViewportSize({ width: 1280, height: 900 });
    await page.goto(`${live.baseUrl}/billing`);
    await settled(page);
    for (const machine of machines) {
      const lines = page.locator(`#statement tr[data-kind="usage"]:has([data-machine-id="${machine.id}"])`);
      assert.equal(await lines.count(), 1, 'one line for the machine and the day');
      await lines.getByText('18 min 0 s').waitFor();
      // The exact sum of its charges on hover, to the micro-dollar.
      const micros = -charges.filter((entry) => entry.machineId === machine.id).reduce((sum, entry) => sum + Math.round(Number(entry.amount) * 1e6), 0);
      const exact = `−$0.${String(micros).padStart(6, '0').replace(/0+$/, '').padEnd(2, '0')} exactly`;
      const amount = lines.locator('td[data-label="Amount"] .money');
      assert.equal(await amount.getAttribute('title'), exact);
      assert.equal(await amount.textContent(), `−$0.${String(Math.round(micros / 10_000)).padStart(2, '0')}`, 'to the cent, half up');
    }
    const rows = await page.locator('#statement tbody tr').count();
    assert.ok(rows < 12, `a handful of lines for everything this account did (${rows}; the ledger has ${entries.length} entries)`);
    assert.deepEqual(problems, []);
  });

  for (const width of [375, 1280]) {
    test(`the Billing page fits ${width} px`, async () => {
      await page.setViewportSize({ width, height: 900 });
      await page.goto(`${live.baseUrl}/billing`);
      await settled(page);
      assert.deepEqual(await layoutProblems(page), []);
    });
  }
});
