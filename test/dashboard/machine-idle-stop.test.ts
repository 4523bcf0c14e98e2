import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { asSession, type TestUser } from '../support/app.ts';
import { openSignedInPage, type LiveApp, type SignedInPage } from '../support/browser.ts';

const SETTLE_MS = 10_000;

/** Idle stop (CONTRACT 20) in the dashboard: autoStopMinutes in the create dialog, and editable on the machine's page. */
describe('dashboard in Chromium: idle stop', () => {
  let live: LiveApp;
  let user: TestUser;
  let page: Page;
  let problems: string[];
  let ui: SignedInPage;

  before(async () => {
    ui = await openSignedInPage({ app: { realClock: true, env: { MACHINE_BOOT_MS: '300', MACHINE_WORKER_INTERVAL_MS: '100', MACHINE_AUTO_STOP_MINUTES: '15' } } });
    ({ live, user, page, problems } = ui);
  });
  after(() => ui?.close());

  const machineNamed = async (name: string) =>
    (await live.app.inject({ method: 'GET', url: '/api/machines', headers: asSession(user.session, live.baseUrl) })).json().data.find((machine: { name: string }) => machine.name === name);

  test('the create dialog takes autoStopMinutes; empty leaves the service default; out of range is refused before sending', async () => {
    await page.goto(`${live.baseUrl}/machines`);
    await page.getByRole('button', { name: 'Create machine' }).click();
    let dialog = page.getByRole('dialog', { name: 'Create machine' });
    await dialog.getByLabel('Name').fill('nightly');
    const minutes = dialog.getByRole('spinbutton', { name: 'Stop when idle for (minutes) (optional)' });
    await minutes.fill('20000');
    await dialog.getByRole('button', { name: 'Create machine' }).click();
    assert.match(await minutes.evaluate((input: HTMLInputElement) => input.validationMessage), /./, 'the browser refuses more than a week');
    assert.equal(await machineNamed('nightly'), undefined, 'nothing was created');
    await minutes.fill('45');
    await dialog.getByRole('button', { name: 'Create machine' }).click();
    await dialog.getByRole('button', { name: 'Done' }).click();
    assert.equal((await machineNamed('nightly')).autoStopMinutes, 45);

    await page.getByRole('button', { name: 'Create machine' }).click();
    dialog = page.getByRole('dialog', { name: 'Create machine' });
    await dialog.getByLabel('Name').fill('defaulted');
    await dialog.getByRole('button', { name: 'Create machine' }).click();
    await dialog.getByRole('button', { name: 'Done' }).click();
    assert.equal((await machineNamed('defaulted')).autoStopMinutes, 15, 'the service default');
  });

  test("the machine's page shows its idle stop and changes it", async () => {
    const machine = await machineNamed('nightly');
    await page.goto(`${live.baseUrl}/machines/${machine.id}`);
    await page.locator('[data-status="running"]').waitFor({ timeout: SETTLE_MS });
    assert.equal(await page.locator('[data-idle-stop]').textContent(), 'Stops after 45 idle min');
    const settings = page.getByRole('form', { name: 'Machine settings' });
    const minutes = settings.getByRole('spinbutton', { name: 'Stop when idle for (minutes)' });
    assert.equal(await minutes.inputValue(), '45');
    await minutes.fill('0');
    await settings.getByRole('button', { name: 'Save settings' }).click();
    await page.getByText('nightly never stops for idleness.').waitFor();
    await page.locator('[data-idle-stop]', { hasText: 'Never idle-stops' }).waitFor();
    assert.equal((await machineNamed('nightly')).autoStopMinutes, 0);
    await minutes.fill('90');
    await settings.getByRole('button', { name: 'Save settings' }).click();
    await page.locator('[data-idle-stop]', { hasText: 'Stops after 90 idle min' }).waitFor();
    assert.equal((await machineNamed('nightly')).autoStopMinutes, 90);
    assert.deepEqual(problems, []);
  });
});
