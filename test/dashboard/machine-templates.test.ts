import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { asSession, type TestUser } from '../support/app.ts';
import { openSignedInPage, type LiveApp, type SignedInPage } from '../support/browser.ts';

const SETTLE_MS = 10_000;

/** Templates and forks in the dashboard (issue 41), on the simulated provider: save a machine as a template, fork it, start a machine from the template, delete it. */
describe('dashboard in Chromium: templates and forks', () => {
  let live: LiveApp;
  let user: TestUser;
  let page: Page;
  let problems: string[];
  let ui: SignedInPage;
  let machineId = '';

  before(async () => {
    ui = await openSignedInPage({ app: { realClock: true, env: { MACHINE_BOOT_MS: '300', MACHINE_WORKER_INTERVAL_MS: '100' } } });
    ({ live, user, page, problems } = ui);
    const created = await live.app.inject({ method: 'POST', url: '/api/machines', headers: asSession(user.session, live.baseUrl), payload: { name: 'golden-box', labels: { team: 'a' } } });
    assert.equal(created.statusCode, 201, created.body);
    machineId = created.json().id;
  });
  after(() => ui?.close());

  const apiGet = async (url: string) => (await live.app.inject({ method: 'GET', url, headers: asSession(user.session, live.baseUrl) })).json();

  test('“Save as template” on the machine’s page saves it under the name given', async () => {
    await page.goto(`${live.baseUrl}/machines/${machineId}`);
    await page.locator('[data-status="running"]').waitFor({ timeout: SETTLE_MS });
    await page.getByRole('button', { name: 'Save as template' }).click();
    const dialog = page.getByRole('dialog', { name: 'Save golden-box as a template' });
    await dialog.getByLabel('Template name').fill('golden');
    await dialog.getByRole('button', { name: 'Save template' }).click();
    await page.getByText('Saved template golden').waitFor();
    await dialog.waitFor({ state: 'detached' });
    const templates = (await apiGet('/api/templates')).data;
    assert.deepEqual(templates.map((t: { name: string; sourceMachineId: string }) => [t.name, t.sourceMachineId]), [['golden', machineId]]);

    // A second one under the same name: the API's refusal is shown in the dialog, which stays open.
    await page.getByRole('button', { name: 'Save as template' }).click();
    await dialog.getByLabel('Template name').fill('golden');
    await dialog.getByRole('button', { name: 'Save template' }).click();
    await dialog.getByText('A template named "golden" already exists.').waitFor();
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    assert.equal((await apiGet('/api/templates')).data.length, 1);
  });

  test('“Fork” makes the machines asked for and links to them; a count over 10 is refused before it is sent', async () => {
    await page.getByRole('button', { name: 'Fork', exact: true }).click();
    const dialog = page.getByRole('dialog', { name: 'Fork golden-box' });
    const count = dialog.getByLabel('How many machines');
    await count.fill('11');
    await dialog.getByRole('button', { name: 'Fork', exact: true }).click();
    assert.notEqual(await count.evaluate((input: HTMLInputElement) => input.validationMessage), '');
    assert.equal((await apiGet('/api/machines')).data.length, 1, 'nothing was made');
    await count.fill('2');
    await dialog.getByLabel('Name').fill('copy');
    await dialog.getByRole('button', { name: 'Fork', exact: true }).click();
    await dialog.getByText('2 machines are starting.').waitFor();
    await dialog.getByRole('link', { name: 'copy-1' }).waitFor();
    await dialog.getByRole('link', { name: 'copy-2' }).waitFor();
    const machines = (await apiGet('/api/machines')).data as Array<{ name: string; labels: Record<string, string> }>;
    assert.deepEqual(machines.map((m) => m.name).sort(), ['copy-1', 'copy-2', 'golden-box']);
    assert.deepEqual(machines.find((m) => m.name === 'copy-1')?.labels, { team: 'a' });
    await dialog.getByRole('link', { name: 'copy-2' }).click();
    await page.getByRole('heading', { level: 1, name: 'copy-2' }).waitFor();
  });

  test('the machines page lists templates with their size; the create dialog starts a machine from one; Delete removes it', async () => {
    await page.goto(`${live.baseUrl}/machines`);
    const templates = page.locator('#templates');
    const row = templates.locator('tr', { hasText: 'golden' });
    await row.waitFor();
    assert.match(await row.innerText(), /Empty/, 'the simulated host keeps no disk: its size says so');

    await page.getByRole('button', { name: 'Create machine' }).first().click();
    const dialog = page.getByRole('dialog', { name: 'Create machine' });
    await dialog.getByLabel('Name').fill('from-golden');
    const choice = dialog.getByLabel('Template');
    await choice.waitFor();
    await choice.selectOption({ label: 'golden · Empty' });
    await dialog.getByRole('button', { name: 'Create machine' }).click();
    await dialog.getByRole('textbox', { name: 'MCP token' }).waitFor();
    await dialog.getByRole('button', { name: 'Done' }).click();
    const template = (await apiGet('/api/templates')).data[0] as { id: string };
    const made = ((await apiGet('/api/machines')).data as Array<{ name: string; template: string | null }>).find((m) => m.name === 'from-golden');
    assert.equal(made?.template, template.id);

    await row.getByRole('button', { name: 'Delete template golden' }).click();
    const confirm = page.getByRole('dialog', { name: 'Delete template golden?' });
    await confirm.getByRole('button', { name: 'Delete template' }).click();
    await templates.getByText('No templates yet').waitFor();
    assert.deepEqual((await apiGet('/api/templates')).data, []);
    assert.deepEqual(problems, []);
  });
});
