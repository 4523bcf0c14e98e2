import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { asSession, type TestUser } from '../support/app.ts';
import { openSignedInPage, type LiveApp, type SignedInPage } from '../support/browser.ts';

/** A machine's network policy in the dashboard (CONTRACT 20): set in the create dialog, shown and changed on the machine's page. */
describe('dashboard in Chromium: a machine’s network policy', () => {
  let live: LiveApp;
  let user: TestUser;
  let page: Page;
  let problems: string[];
  let ui: SignedInPage;

  before(async () => {
    ui = await openSignedInPage({ app: { realClock: true, env: { MACHINE_BOOT_MS: '300', MACHINE_WORKER_INTERVAL_MS: '100' } } });
    ({ live, user, page, problems } = ui);
  });
  after(() => ui?.close());

  const machineOf = async (id: string) => (await live.app.inject({ method: 'GET', url: `/api/machines/${id}`, headers: asSession(user.session, live.baseUrl) })).json();

  test('the create dialog sends an allow list; left alone, it sends none', async () => {
    await page.goto(`${live.baseUrl}/machines`);
    await page.getByRole('button', { name: 'Create machine' }).first().click();
    let dialog = page.getByRole('dialog', { name: 'Create machine' });
    await dialog.getByRole('textbox', { name: 'Name' }).fill('open-box');
    await dialog.getByRole('button', { name: 'Create machine' }).click();
    await dialog.getByText('MCP token').first().waitFor();
    await dialog.getByRole('button', { name: 'Done' }).click();

    await page.getByRole('button', { name: 'Create machine' }).first().click();
    dialog = page.getByRole('dialog', { name: 'Create machine' });
    await dialog.getByRole('textbox', { name: 'Name' }).fill('pypi-box');
    await dialog.locator('[data-network-details] summary').click();
    await dialog.getByRole('combobox', { name: 'Internet' }).selectOption('listed');
    await dialog.getByRole('textbox', { name: 'Allowed (optional)' }).fill('pypi.org\n*.pythonhosted.org');
    await dialog.getByRole('textbox', { name: 'Denied (optional)' }).fill('198.51.100.0/24');
    await dialog.getByRole('button', { name: 'Create machine' }).click();
    await dialog.getByText('MCP token').first().waitFor();
    await dialog.getByRole('button', { name: 'Done' }).click();

    const machines = (await live.app.inject({ method: 'GET', url: '/api/machines', headers: asSession(user.session, live.baseUrl) })).json().data as Array<{ name: string; network: unknown }>;
    assert.equal(machines.find((machine) => machine.name === 'open-box')!.network, null);
    assert.deepEqual(machines.find((machine) => machine.name === 'pypi-box')!.network, { internet: false, allow: ['pypi.org', '*.pythonhosted.org'], deny: ['198.51.100.0/24'] });
  });

  test('the machine page shows the policy and changes it; a bad entry shows the service’s reason and changes nothing', async () => {
    const created = await live.app.inject({ method: 'POST', url: '/api/machines', headers: asSession(user.session, live.baseUrl), payload: { name: 'net-box', network: { internet: false, allow: ['pypi.org'] } } });
    const id = created.json().id as string;
    await page.goto(`${live.baseUrl}/machines/${id}`);
    const section = page.getByRole('region', { name: 'Network' });
    await section.getByText('Only pypi.org.').waitFor();

    await section.getByRole('button', { name: 'Change' }).click();
    await section.getByRole('textbox', { name: 'Allowed (optional)' }).fill('pypi.org\nnot a domain');
    await section.getByRole('button', { name: 'Save policy' }).click();
    await section.getByRole('alert').filter({ hasText: 'neither an IPv4 CIDR' }).waitFor();
    assert.deepEqual((await machineOf(id)).network.allow, ['pypi.org']);

    await section.getByRole('combobox', { name: 'Internet' }).selectOption('open');
    await section.getByRole('textbox', { name: 'Denied (optional)' }).fill('203.0.113.0/24');
    await section.getByRole('button', { name: 'Save policy' }).click();
    await section.getByText('Internet open. Denied: 203.0.113.0/24.').waitFor();
    assert.deepEqual((await machineOf(id)).network, { internet: true, allow: [], deny: ['203.0.113.0/24'] });
    assert.deepEqual(problems, []);
  });
});
