import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { after, before, describe, test } from 'node:test';
import type { Page, Request } from 'playwright-core';
import { asSession, type TestUser } from '../support/app.ts';
import { eventually, type LiveApp } from '../support/browser.ts';
import { dockerUnavailable } from '../support/docker.ts';
import { MACHINE_ACTION_MS, MACHINE_MS, openDockerMachinePage, type DockerMachinePage } from './docker-machine-page.ts';
import { layoutProblems, settled, unnamedControls, walkTabStops } from './page-audits.ts';

const skip = await dockerUnavailable();


/**
 * A real machine's page in Chromium, on a real Docker engine (CONTRACT 15):
 * runs with real stdout, stderr, exit codes and timeouts; the file browser
 * (upload, list, download byte for byte, folders, delete); processes (output
 * followed as it comes, input, a signal, the exit).
 */
describe('dashboard in Chromium: a Docker machine’s runs, files and processes', { skip, timeout: 600_000 }, () => {
  let live: LiveApp;
  let user: TestUser;
  let page: Page;
  let problems: string[];
  let ui: DockerMachinePage;
  let machineId = '';

  before(async () => {
    ui = await openDockerMachinePage({ name: 'real-box' });
    ({ live, user, page, problems, machineId } = ui);
  });
  after(() => ui?.close());

  const call = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, payload?: object | Buffer) =>
    live.app.inject({ method, url, headers: { ...asSession(user.session, live.baseUrl), ...(Buffer.isBuffer(payload) ? { 'content-type': 'application/octet-stream' } : {}) }, ...(payload ? { payload } : {}) });
  const files = () => page.locator('#files');
  const entry = (name: string) => files().locator(`tr[data-entry="${name}"]`);

  test('a run: stdout and stderr apart, the exit code; a run past its timeout says it timed out', async () => {
    await page.goto(`${live.baseUrl}/machines/${machineId}`);
    const form = page.getByRole('form', { name: 'Run a command' });
    await form.getByRole('textbox', { name: 'Command' }).fill('echo "in $PWD"; echo oops >&2; exit 3');
    await form.getByRole('textbox', { name: 'Working directory (optional)' }).fill('/tmp');
    await form.getByRole('button', { name: 'Run command' }).click();
    const dialog = page.getByRole('dialog', { name: 'Run output' });
    await dialog.locator('.badge', { hasText: 'Failed' }).waitFor({ timeout: MACHINE_ACTION_MS });
    assert.equal(await dialog.getByRole('region', { name: 'Standard output (stdout)' }).textContent(), 'in /tmp\n');
    assert.equal(await dialog.getByRole('region', { name: 'Standard error (stderr)' }).textContent(), 'oops\n');
    assert.equal(await dialog.locator('[data-exit-code]').getAttribute('data-exit-code'), '3');
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });

    await form.getByRole('textbox', { name: 'Command' }).fill('echo started; sleep 60');
    await form.getByRole('textbox', { name: 'Working directory (optional)' }).fill('');
    await form.getByRole('spinbutton', { name: 'Timeout in seconds (optional)' }).fill('1');
    await form.getByRole('button', { name: 'Run command' }).click();
    await dialog.locator('.badge', { hasText: 'Timed out' }).waitFor({ timeout: MACHINE_ACTION_MS });
    await dialog.getByText('Yes: killed at its timeout').waitFor();
    assert.equal(await dialog.locator('[data-exit-code]').getAttribute('data-exit-code'), '', 'no exit code');
    await page.keyboard.press('Escape');
  });

  test('files: upload into the folder shown, see it listed, download the same bytes, delete it', async () => {
    await files().getByRole('navigation', { name: 'Folder' }).getByText('root', { exact: true }).waitFor({ timeout: MACHINE_ACTION_MS });
    const bytes = Buffer.concat([Buffer.from([...Array(256).keys()]), randomBytes(200_000)]);
    await files().getByLabel('Upload a file').setInputFiles({ name: 'payload.bin', mimeType: 'application/octet-stream', buffer: bytes });
    await files().getByRole('button', { name: 'Upload', exact: true }).click();
    await entry('payload.bin').waitFor({ timeout: MACHINE_ACTION_MS });
    assert.match(String(await entry('payload.bin').locator('td[data-label="Size"]').textContent()), /^196 KiB$/);
    const stored = await call('GET', `/api/machines/${machineId}/files?path=/root/payload.bin`);
    assert.ok(stored.rawPayload.equals(bytes), 'the machine holds the bytes uploaded');

    const [download] = await Promise.all([page.waitForEvent('download', { timeout: MACHINE_ACTION_MS }), files().getByRole('button', { name: 'Download payload.bin' }).click()]);
    assert.equal(download.suggestedFilename(), 'payload.bin');
    assert.ok((await readFile(await download.path())).equals(bytes), 'the download is byte for byte what was uploaded');

    // The same name again: replaced after confirming.
    await files().getByLabel('Upload a file').setInputFiles({ name: 'payload.bin', mimeType: 'text/plain', buffer: Buffer.from('second version\n') });
    await files().getByRole('button', { name: 'Upload', exact: true }).click();
    const replace = page.getByRole('dialog', { name: 'Replace payload.bin?' });
    await replace.getByRole('button', { name: 'Replace file' }).click();
    await replace.waitFor({ state: 'detached' });
    await entry('payload.bin').locator('td[data-label="Size"]', { hasText: '15 B' }).waitFor({ timeout: MACHINE_ACTION_MS });

    await files().getByRole('button', { name: 'Delete payload.bin' }).click();
    const confirm = page.getByRole('dialog', { name: 'Delete payload.bin?' });
    await confirm.getByText('/root/payload.bin').waitFor();
    await confirm.getByRole('button', { name: 'Delete file' }).click();
    await entry('payload.bin').waitFor({ state: 'detached', timeout: MACHINE_ACTION_MS });
    assert.equal((await call('GET', `/api/machines/${machineId}/files?path=/root/payload.bin`)).statusCode, 404);
  });

  test('folders: opened from the list, left from the path; deleted with everything in them only when that is ticked', async () => {
    assert.equal((await call('PUT', `/api/machines/${machineId}/files?path=/root/reports/2026/summary.txt`, Buffer.from('all good\n'))).statusCode, 204);
    await files().getByRole('button', { name: 'Refresh' }).click();
    await files().getByRole('button', { name: 'Open folder reports' }).click();
    await entry('2026').waitFor({ timeout: MACHINE_ACTION_MS });
    assert.equal(await files().locator('[aria-current="location"]').textContent(), 'reports');
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'reports', 'focus moves to the folder opened');
    await files().getByRole('button', { name: 'Open folder 2026' }).click();
    await entry('summary.txt').waitFor({ timeout: MACHINE_ACTION_MS });
    await files().getByRole('button', { name: 'Open /root', exact: true }).click();
    await entry('reports').waitFor({ timeout: MACHINE_ACTION_MS });

    await files().getByRole('button', { name: 'Delete reports' }).click();
    const confirm = page.getByRole('dialog', { name: 'Delete reports?' });
    await confirm.getByRole('button', { name: 'Delete folder' }).click();
    await confirm.getByRole('alert').getByText('Tick the box above to confirm.').waitFor();
    assert.equal((await call('GET', `/api/machines/${machineId}/files?path=/root/reports`)).statusCode, 200, 'nothing deleted without the tick');
    await confirm.getByRole('checkbox', { name: 'Delete everything inside reports too' }).check();
    await confirm.getByRole('button', { name: 'Delete folder' }).click();
    await confirm.waitFor({ state: 'detached' });
    await entry('reports').waitFor({ state: 'detached', timeout: MACHINE_ACTION_MS });
    assert.equal((await call('GET', `/api/machines/${machineId}/files?path=/root/reports`)).statusCode, 404);
  });

  test('a process: its output follows as it comes, input reaches it, a signal ends it', async () => {
    const processes = page.locator('#processes');
    await processes.getByRole('textbox', { name: 'Command' }).fill('echo ready; echo warming >&2; while read line; do echo "got $line"; done');
    await processes.getByRole('button', { name: 'Start process' }).click();
    const view = page.getByRole('dialog', { name: 'Process' });
    const stdout = view.getByRole('region', { name: 'Standard output (stdout)' });
    await stdout.getByText('ready').waitFor({ timeout: MACHINE_ACTION_MS });
    await view.getByRole('region', { name: 'Standard error (stderr)' }).getByText('warming').waitFor({ timeout: MACHINE_ACTION_MS });
    assert.equal(await view.getByRole('textbox', { name: 'Input' }).evaluate((input) => input === document.activeElement), true, 'the view opens on its input');

    await page.keyboard.type('hello machine');
    await page.keyboard.press('Enter');
    await stdout.getByText('got hello machine').waitFor({ timeout: MACHINE_ACTION_MS });
    assert.equal(await view.getByRole('textbox', { name: 'Input' }).inputValue(), '', 'the input is sent and cleared');

    await view.getByRole('group', { name: 'Send a signal' }).getByRole('button', { name: 'Terminate (TERM)' }).click();
    await view.locator('.process-state[data-exit-code]').waitFor({ timeout: MACHINE_ACTION_MS });
    assert.match(String(await view.locator('.process-state').textContent()), /^(Exited \d+|Ended)/);
    assert.equal(await view.getByRole('button', { name: 'Terminate (TERM)' }).count(), 0, 'no signal for an ended process');
    await view.getByRole('button', { name: 'Close' }).last().click();
    await view.waitFor({ state: 'detached' });
    await processes.locator('tr[data-status="exited"]').waitFor({ timeout: MACHINE_ACTION_MS });
  });

  test('closing the view of a running process stops following it; opening it again shows what it wrote', async () => {
    const processes = page.locator('#processes');
    // The output reads in flight: each waits for more until the view closes.
    const pending = new Set<Request>();
    page.on('request', (request) => {
      if (request.url().includes('/output?')) pending.add(request);
    });
    page.on('requestfinished', (request) => pending.delete(request));
    page.on('requestfailed', (request) => pending.delete(request));
    await processes.getByRole('textbox', { name: 'Command' }).fill('for i in 1 2 3; do echo "tick $i"; done; sleep 600');
    await processes.getByRole('button', { name: 'Start process' }).click();
    const view = page.getByRole('dialog', { name: 'Process' });
    await view.getByText('tick 3').waitFor({ timeout: MACHINE_ACTION_MS });
    await eventually(() => (pending.size > 0 ? true : undefined), 'a read waiting for more output');
    await page.keyboard.press('Escape');
    await view.waitFor({ state: 'detached' });
    await eventually(() => (pending.size === 0 ? true : undefined), 'the long poll aborted when the view closed');

    const row = processes.locator('tr[data-status="running"]');
    await row.getByRole('button', { name: /^Output of for i in/ }).click();
    const stdout = view.getByRole('region', { name: 'Standard output (stdout)' });
    await stdout.getByText('tick 3').waitFor({ timeout: MACHINE_ACTION_MS });
    assert.equal(await stdout.textContent(), 'tick 1\ntick 2\ntick 3\n');
    await view.getByRole('button', { name: 'Kill (KILL)' }).click();
    await view.locator('.process-state[data-exit-code]').waitFor({ timeout: MACHINE_ACTION_MS });
    await page.keyboard.press('Escape');
  });

  test('the page fits 375 and 1280 px, names every control and shows focus, with real files and processes', async () => {
    for (const width of [375, 1280]) {
      await page.setViewportSize({ width, height: 800 });
      await page.goto(`${live.baseUrl}/machines/${machineId}`);
      await page.locator('#files tbody tr').first().waitFor({ timeout: MACHINE_ACTION_MS });
      await page.locator('#processes tbody tr').first().waitFor({ timeout: MACHINE_ACTION_MS });
      await settled(page);
      const found = [...(await layoutProblems(page)), ...(await unnamedControls(page))];
      const stops = await walkTabStops(page);
      found.push(...stops.flatMap((stop) => [...(stop.problem ? [`${stop.label}: ${stop.problem}`] : []), ...(/""$/.test(stop.label) ? [`${stop.label}: no name`] : [])]));
      await page.locator('#processes tbody tr').first().getByRole('button', { name: /^Output of/ }).click();
      await page.getByRole('dialog', { name: 'Process' }).locator('.process-state[data-exit-code]').waitFor({ timeout: MACHINE_ACTION_MS });
      found.push(...(await layoutProblems(page)).map((problem) => `process view: ${problem}`), ...(await unnamedControls(page)).map((problem) => `process view: ${problem}`));
      await page.keyboard.press('Escape');
      assert.deepEqual(found, [], `${width} px`);
    }
  });

  test('a stopped machine: its files and processes say they come back when it runs', async () => {
    await page.getByRole('button', { name: 'Stop', exact: true }).click();
    await page.locator('[data-status="stopped"]').waitFor({ timeout: MACHINE_MS });
    for (const section of ['#files', '#processes']) {
      const state = page.locator(`${section} [data-unavailable="invalid_state"]`);
      await state.waitFor({ timeout: MACHINE_ACTION_MS });
      assert.match(String(await state.textContent()), /The machine is stopped\..*Start it/);
    }
  });

  test('no page error or CSP violation on the way', () => {
    assert.deepEqual(problems, []);
  });
});
