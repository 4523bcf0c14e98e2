import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { asSession, type TestUser } from '../support/app.ts';
import { capacityExhausted } from '../../src/hosts/hosts.errors.ts';
import { openSignedInPage, type LiveApp, type SignedInPage } from '../support/browser.ts';

const SETTLE_MS = 10_000;

describe('dashboard in Chromium: machines', () => {
  let live: LiveApp;
  let user: TestUser;
  let page: Page;
  let problems: string[];
  let ui: SignedInPage;
  let platformFull = false;

  before(async () => {
    // Real time and a short boot: the page waits for machines to come up.
    ui = await openSignedInPage({
      app: {
        realClock: true,
        env: { MACHINE_BOOT_MS: '300', MACHINE_WORKER_INTERVAL_MS: '100', MACHINE_IMAGES: 'python=python:3.13-slim' },
        // The simulated provider has no hosts to fill: a full platform is the placement's own error, thrown where it would be.
        setup: (app) => {
          app.addHook('preHandler', async (request) => {
            if (platformFull && request.method === 'POST' && request.routeOptions.url === '/api/machines') throw capacityExhausted('small');
          });
        },
      },
      clipboard: true,
    });
    ({ live, user, page, problems } = ui);
  });
  after(() => ui?.close());

  const machinesApi = async () => (await live.app.inject({ method: 'GET', url: '/api/machines', headers: asSession(user.session, live.baseUrl) })).json().data;
  const liveViewWith = async (id: string, token: string) => (await live.app.inject({ method: 'POST', url: `/api/machines/${id}/live-view`, headers: { authorization: `Bearer ${token}` } })).statusCode;
  let firstToken = '';
  const rowOf = (name: string, status?: string) => page.locator(`tr${status ? `[data-status="${status}"]` : ''}`, { has: page.locator('.table__primary', { hasText: name }) });

  test('create a machine: its MCP token shown once, then it runs', async () => {
    await page.goto(`${live.baseUrl}/machines`);
    await page.getByText('No machines yet').waitFor();
    // Machines on the simulated provider (test/support/app.ts): the page says they run nothing, and how to get real ones.
    const notice = page.locator('#machine-host-notice');
    await notice.getByText('Machines are simulated: they run no commands.').waitFor();
    assert.match(await notice.innerText(), /To get real machines: start Docker on the service’s host and restart the service/);
    await page.getByRole('button', { name: 'Create machine' }).click();
    const dialog = page.getByRole('dialog', { name: 'Create machine' });
    await dialog.getByLabel('Name').fill('research-agent');
    await dialog.getByLabel('Labels').fill('team=research\nenv=staging');
    const env = dialog.getByLabel('Environment');
    await env.fill('9LIVES=x');
    assert.match(await env.evaluate((input: HTMLTextAreaElement) => input.validationMessage), /Line 1: write each variable as NAME=value/);
    await env.fill('API_TOKEN=s3cret value=1\nDEBUG=');
    const image = dialog.getByLabel('Image');
    assert.equal(await image.inputValue(), 'default');
    await image.selectOption('python');
    await dialog.getByRole('button', { name: 'Create machine' }).click();
    const token = await dialog.getByRole('textbox', { name: 'MCP token' }).inputValue();
    assert.match(token, /^tmm_[0-9A-Za-z]{38}$/);
    firstToken = token;
    const [machine] = await machinesApi();
    assert.deepEqual([machine.name, machine.labels, machine.envNames, machine.image], ['research-agent', { team: 'research', env: 'staging' }, ['API_TOKEN', 'DEBUG'], 'python']);
    const row = await live.app.deps.db.selectFrom('machines').select('env_sealed').where('id', '=', machine.id).executeTakeFirstOrThrow();
    assert.deepEqual(JSON.parse(live.app.deps.secrets.open(row.env_sealed!)), { API_TOKEN: 's3cret value=1', DEBUG: '' });
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

  test('a new MCP token after confirming: shown once with a copy button; the old token stops working at once', async () => {
    const [machine] = await machinesApi();
    await page.getByRole('button', { name: 'New MCP token for research-agent' }).click();
    const confirm = page.getByRole('dialog', { name: 'New MCP token for research-agent?' });
    await confirm.getByText('The current token stops working at once.').waitFor();
    await confirm.getByRole('button', { name: 'Cancel' }).click();
    assert.equal(await liveViewWith(machine.id, firstToken), 201, 'cancel keeps the token');

    await page.getByRole('button', { name: 'New MCP token for research-agent' }).click();
    await confirm.getByRole('button', { name: 'Issue new token' }).click();
    const dialog = page.getByRole('dialog', { name: 'New MCP token for research-agent' });
    const token = await dialog.getByRole('textbox', { name: 'MCP token' }).inputValue();
    assert.match(token, /^tmm_[0-9A-Za-z]{38}$/);
    assert.notEqual(token, firstToken);
    await dialog.getByText('it will not be shown again').waitFor();
    await dialog.getByText(`/api/machines/${machine.id}/mcp`).waitFor();
    await dialog.getByRole('button', { name: 'Copy MCP token' }).click();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), token);
    assert.equal(await liveViewWith(machine.id, firstToken), 401, 'the old token stopped working');
    assert.equal(await liveViewWith(machine.id, token), 201, 'the new one works');

    await dialog.getByRole('button', { name: 'Done' }).click();
    await dialog.waitFor({ state: 'detached' });
    assert.ok(!(await page.content()).includes(token), 'the token left with its dialog');
    assert.equal(await page.evaluate(() => document.activeElement?.getAttribute('aria-label')), 'New MCP token for research-agent', 'focus is back on the button');
  });

  test('pause, then resume (CONTRACT 20): the list pauses nothing (the machine page does); a paused machine offers Resume and Stop, not its live view', async () => {
    // Four actions fit a running machine's row at 1024 px (layout.test.ts): Pause is on the machine's own page.
    assert.equal(await page.getByRole('button', { name: 'Pause research-agent' }).count(), 0);
    const [machine] = await machinesApi();
    const paused = await live.app.inject({ method: 'POST', url: `/api/machines/${machine.id}/pause`, headers: asSession(user.session, live.baseUrl) });
    assert.equal(paused.statusCode, 200, paused.body);
    // The list polls only while a machine is on its way: a change made elsewhere shows on the next visit.
    await page.reload();
    await rowOf('research-agent', 'paused').waitFor({ timeout: SETTLE_MS });
    assert.equal((await machinesApi())[0].status, 'paused');
    await rowOf('research-agent').locator('.badge', { hasText: 'Paused' }).waitFor();
    assert.equal(await page.getByRole('button', { name: 'Pause research-agent' }).count(), 0);
    assert.equal(await page.getByRole('button', { name: 'Live view of research-agent' }).count(), 0);
    await page.getByRole('button', { name: 'Stop research-agent' }).waitFor();
    await page.getByRole('button', { name: 'Resume research-agent' }).click();
    await rowOf('research-agent', 'running').waitFor({ timeout: SETTLE_MS });
    assert.equal((await machinesApi())[0].status, 'running');
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

  test('a destroyed machine is hidden until "Show destroyed" is ticked (they stayed listed forever)', async () => {
    await rowOf('research-agent').waitFor({ state: 'detached' });
    await page.getByText('No machines right now').waitFor();
    const toggle = page.getByRole('checkbox', { name: 'Show destroyed (1)' });
    await toggle.check();
    await rowOf('research-agent', 'destroyed').getByText('Destroyed', { exact: true }).waitFor();
    assert.equal(await rowOf('research-agent').getByRole('button').count(), 0, 'no action on a destroyed machine');
    await toggle.uncheck();
    await rowOf('research-agent').waitFor({ state: 'detached' });
  });

  test('a stopping machine, and a status this page has never heard of, get a sensible badge', async () => {
    const base = { size: 'small', externalId: null, labels: {}, expiresAt: null, createdAt: new Date().toISOString() };
    await page.route('**/api/machines?*', (route) => route.fulfill({
      json: {
        data: [
          { ...base, id: 'mch_01jd0000000000000000000001', name: 'winding-down', status: 'stopping' },
          { ...base, id: 'mch_01jd0000000000000000000002', name: 'sleepy', status: 'deep_hibernation' },
        ],
        nextCursor: null,
      },
    }));
    try {
      await page.goto(`${live.baseUrl}/machines`);
      const stopping = rowOf('winding-down', 'stopping').locator('td[data-label="Status"] .badge');
      await stopping.waitFor();
      assert.equal(await stopping.textContent(), 'Stopping');
      assert.match(String(await stopping.getAttribute('class')), /badge--warning.*badge--pulse/);
      const unknown = rowOf('sleepy', 'deep_hibernation').locator('td[data-label="Status"] .badge');
      assert.equal(await unknown.textContent(), 'Deep hibernation');
      assert.match(String(await unknown.getAttribute('class')), /badge--neutral/);
      assert.deepEqual(await rowOf('winding-down').getByRole('button').allTextContents(), ['New MCP token', 'Destroy'], 'no start or stop while it stops');
    } finally {
      await page.unroute('**/api/machines?*');
    }
  });

  test('an API error that names a field is shown at that field, which takes the focus', async () => {
    await page.goto(`${live.baseUrl}/machines`);
    await page.getByRole('button', { name: 'Create machine' }).click();
    const dialog = page.getByRole('dialog', { name: 'Create machine' });
    const name = dialog.getByRole('textbox', { name: 'Name' });
    await name.fill('   ');
    await dialog.getByRole('button', { name: 'Create machine' }).click();
    await dialog.locator('input[name="name"][aria-invalid="true"]').waitFor();
    const described = await name.evaluate((input) => (input.getAttribute('aria-describedby') ?? '').split(' ').map((id) => document.getElementById(id)?.textContent ?? ''));
    assert.ok(described.includes('Name must not have fewer than 1 characters.'), `the field's description carries the message, capitalised: ${JSON.stringify(described)}`);
    assert.equal(await name.evaluate((input) => input === document.activeElement), true, 'focus moved to the field');
    assert.equal(await dialog.getByRole('alert').count(), 0, 'not repeated at the top of the form');
    await name.fill('fixed-name');
    assert.equal(await name.getAttribute('aria-invalid'), null, 'editing the field clears its error');
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
  });

  test('when no host has room, the create dialog says so plainly and nothing is made', async () => {
    const before = (await machinesApi()).length;
    await page.goto(`${live.baseUrl}/machines`);
    await page.getByRole('button', { name: 'Create machine' }).click();
    const dialog = page.getByRole('dialog', { name: 'Create machine' });
    await dialog.getByLabel('Name').fill('no-room');
    platformFull = true;
    try {
      await dialog.getByRole('button', { name: 'Create machine' }).click();
      const alert = dialog.getByRole('alert');
      await alert.waitFor();
      assert.match(await alert.innerText(), /No host has room for a small machine now\. Try again later or with a smaller size/);
    } finally {
      platformFull = false;
    }
    assert.equal((await machinesApi()).length, before);
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
  });

  test('no page error or CSP violation on the way', () => {
    assert.deepEqual(problems, []);
  });
});
