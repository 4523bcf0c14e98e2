import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { asSession, registerUser, type TestUser } from '../support/app.ts';
import { launchBrowser, newContext, startLiveApp, useSession, watchConsole, type LiveApp } from '../support/browser.ts';

const SETTLE_MS = 10_000;

describe('dashboard in Chromium: machines', () => {
  let live: LiveApp;
  let browser: Browser;
  let user: TestUser;
  let page: Page;
  let problems: string[];

  before(async () => {
    // Real time and a short boot: the page waits for machines to come up.
    live = await startLiveApp({ realClock: true, env: { MACHINE_BOOT_MS: '300', MACHINE_WORKER_INTERVAL_MS: '100' } });
    browser = await launchBrowser();
    user = await registerUser(live);
    const context = await newContext(browser);
    await useSession(context, live, user.session);
    page = await context.newPage();
    problems = watchConsole(page);
  });
  after(async () => {
    await browser?.close();
    await live?.close();
  });

  const machinesApi = async () => (await live.app.inject({ method: 'GET', url: '/api/machines', headers: asSession(user.session, live.baseUrl) })).json().data;
  const rowOf = (name: string, status?: string) => page.locator(`tr${status ? `[data-status="${status}"]` : ''}`, { has: page.locator('.table__primary', { hasText: name }) });

  test('create a machine: its MCP token shown once, then it runs', async () => {
    await page.goto(`${live.baseUrl}/machines`);
    await page.getByText('No machines yet').waitFor();
    await page.getByRole('button', { name: 'Create machine' }).click();
    const dialog = page.getByRole('dialog', { name: 'Create machine' });
    await dialog.getByLabel('Name').fill('research-agent');
    await dialog.getByLabel('Labels').fill('team=research\nenv=staging');
    await dialog.getByRole('button', { name: 'Create machine' }).click();
    const token = await dialog.getByRole('textbox', { name: 'MCP token' }).inputValue();
    assert.match(token, /^tmm_[0-9A-Za-z]{38}$/);
    const [machine] = await machinesApi();
    assert.deepEqual([machine.name, machine.labels], ['research-agent', { team: 'research', env: 'staging' }]);
    await dialog.getByText(`/api/machines/${machine.id}/mcp`).waitFor();
    await dialog.getByRole('button', { name: 'Done' }).click();
    assert.ok(!(await page.content()).includes(token), 'the token left with its dialog');

    await rowOf('research-agent', 'running').waitFor({ timeout: SETTLE_MS });
    const liveView = await live.app.inject({ method: 'POST', url: `/api/machines/${machine.id}/live-view`, headers: { authorization: `Bearer ${token}` } });
    assert.equal(liveView.statusCode, 201, 'the token shown is the machine’s');
  });

  test('a live-view link for a running machine', async () => {
    await page.getByRole('button', { name: 'Live view of research-agent' }).click();
    const dialog = page.getByRole('dialog', { name: 'Live view of research-agent' });
    const link = dialog.getByRole('link', { name: 'Open live view' });
    await link.waitFor();
    assert.match(String(await link.getAttribute('href')), /^https?:\/\//);
    assert.equal(await link.getAttribute('rel'), 'noopener noreferrer');
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
  });

  test('stop, start, then destroy after confirming', async () => {
    await page.getByRole('button', { name: 'Stop research-agent' }).click();
    await rowOf('research-agent', 'stopped').waitFor({ timeout: SETTLE_MS });
    assert.equal((await machinesApi())[0].status, 'stopped');
    await page.getByRole('button', { name: 'Start research-agent' }).click();
    await rowOf('research-agent', 'running').waitFor({ timeout: SETTLE_MS });

    await page.getByRole('button', { name: 'Destroy research-agent' }).click();
    const confirm = page.getByRole('dialog', { name: 'Destroy research-agent?' });
    await confirm.getByRole('button', { name: 'Destroy machine' }).click();
    await confirm.waitFor({ state: 'detached' });
    await page.waitForFunction(() => !document.querySelector('tr[data-status="running"], tr[data-status="stopping"]'));
    const [machine] = await machinesApi();
    assert.ok(machine === undefined || machine.status === 'destroyed', `after destroy: ${JSON.stringify(machine)}`);
  });

  test('no page error or CSP violation on the way', (t) => {
    assert.deepEqual(problems, []);
  });
});
