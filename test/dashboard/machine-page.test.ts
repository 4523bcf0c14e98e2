import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import type { Page, Request } from 'playwright-core';
import { asSession, type TestUser } from '../support/app.ts';
import { eventually, openSignedInPage, type LiveApp, type SignedInPage } from '../support/browser.ts';

const SETTLE_MS = 10_000;
/** Longer than the screen section's refresh (3 s): a read it would make has been asked for by then. */
const QUIET_MS = 5000;

/** A machine's page on the simulated provider: its screen (the provider's picture), runs with stdout and stderr apart; files and processes say what they need. */
describe('dashboard in Chromium: a machine’s page', () => {
  let live: LiveApp;
  let user: TestUser;
  let page: Page;
  let problems: string[];
  let ui: SignedInPage;
  let machineId = '';

  before(async () => {
    ui = await openSignedInPage({ app: { realClock: true, env: { MACHINE_BOOT_MS: '300', MACHINE_WORKER_INTERVAL_MS: '100' } } });
    ({ live, user, page, problems } = ui);
    const created = await live.app.inject({ method: 'POST', url: '/api/machines', headers: asSession(user.session, live.baseUrl), payload: { name: 'build-box' } });
    assert.equal(created.statusCode, 201, created.body);
    machineId = created.json().id;
  });
  after(() => ui?.close());

  const runDialog = () => page.getByRole('dialog', { name: 'Run output' });

  test('the machine’s name in the list leads to its page', async () => {
    await page.goto(`${live.baseUrl}/machines`);
    await page.getByRole('link', { name: 'build-box' }).click();
    await page.waitForURL(`${live.baseUrl}/machines/${machineId}`);
    await page.getByRole('heading', { level: 1, name: 'build-box' }).waitFor();
    await page.locator('[data-status="running"]').waitFor({ timeout: SETTLE_MS });
  });

  test('Pause and Resume in the page’s header (CONTRACT 20)', async () => {
    await page.getByRole('button', { name: 'Pause', exact: true }).click();
    await page.locator('[data-status="paused"]').waitFor({ timeout: SETTLE_MS });
    assert.equal(await page.getByRole('button', { name: 'Pause', exact: true }).count(), 0);
    await page.getByRole('button', { name: 'Stop', exact: true }).waitFor();
    const machine = (await live.app.inject({ method: 'GET', url: `/api/machines/${machineId}`, headers: asSession(user.session, live.baseUrl) })).json();
    assert.equal(machine.status, 'paused');
    await page.getByRole('button', { name: 'Resume', exact: true }).click();
    await page.locator('[data-status="running"]').waitFor({ timeout: SETTLE_MS });
    await page.getByRole('button', { name: 'Pause', exact: true }).waitFor();
  });

  test('a run started from the form shows its exit code, and stdout and stderr in blocks of their own', async () => {
    const form = page.getByRole('form', { name: 'Run a command' });
    await form.getByRole('textbox', { name: 'Command' }).fill('make test; exit 3');
    await form.getByRole('spinbutton', { name: 'Timeout in seconds (optional)' }).fill('30');
    await form.getByRole('button', { name: 'Run command' }).click();
    const dialog = runDialog();
    await dialog.getByText('Failed', { exact: true }).waitFor({ timeout: SETTLE_MS });
    assert.equal(await dialog.locator('[data-exit-code]').getAttribute('data-exit-code'), '3');
    assert.equal(await dialog.getByRole('region', { name: 'Standard output (stdout)' }).textContent(), 'make test; exit 3', 'the simulated provider echoes the command');
    assert.equal(await dialog.locator('[data-stream="stderr"]').getByText('Nothing written.').count(), 1, 'an empty stderr says so');
    assert.equal(await dialog.locator('dd', { hasText: /^No$/ }).count(), 1, 'not timed out');
    const runs = (await live.app.inject({ method: 'GET', url: `/api/machines/${machineId}/runs`, headers: asSession(user.session, live.baseUrl) })).json().data;
    assert.equal(runs[0].command, 'make test; exit 3');
    const kept = await live.app.inject({ method: 'GET', url: `/api/runs/${runs[0].id}/screenshot`, headers: asSession(user.session, live.baseUrl) });
    assert.equal(kept.statusCode, 404, 'the simulated provider keeps no picture of a run');
    assert.equal(await dialog.locator('[data-run-screenshot]').innerHTML(), '', 'a run without a picture shows nothing of one');
    assert.equal(await dialog.getByRole('alert').count(), 0);
    await dialog.getByRole('button', { name: 'Close' }).first().click();
    await dialog.waitFor({ state: 'detached' });
    const row = page.locator(`tr[data-run-id="${runs[0].id}"]`);
    assert.equal(await row.locator('td[data-label="Exit code"]').textContent(), '3');
    assert.equal(await row.locator('td[data-label="Status"]').textContent(), 'Failed');
  });

  test('a run that timed out, with stderr and output past the limit: said plainly, stderr set apart', async () => {
    const run = {
      id: 'run_01jd0000000000000000000009', machineId, source: 'manual', sourceId: null, command: 'npm test', stopAfter: false,
      status: 'failed', exitCode: null, output: 'PASS a\nError: connect ECONNREFUSED\n', stdout: 'PASS a\n', stderr: 'Error: connect ECONNREFUSED\n',
      truncated: true, timedOut: true, createdAt: new Date().toISOString(), startedAt: new Date().toISOString(), finishedAt: new Date().toISOString(),
    };
    await page.route(`**/api/machines/${machineId}/runs?*`, (route) => route.fulfill({ json: { data: [run], nextCursor: null } }));
    // The picture the run kept (the simulated provider keeps none).
    await page.route(`**/api/runs/${run.id}/screenshot`, (route) => route.fulfill({ contentType: 'image/svg+xml', body: '<svg xmlns="http://www.w3.org/2000/svg" width="320" height="200"><rect width="320" height="200" fill="teal"/></svg>' }));
    try {
      await page.reload();
      await page.getByRole('button', { name: `Output of run ${run.id}` }).click();
      const dialog = runDialog();
      await dialog.locator('.badge', { hasText: 'Timed out' }).waitFor();
      await dialog.getByText('Yes: killed at its timeout').waitFor();
      await dialog.getByText('None: killed at its timeout').waitFor();
      await dialog.locator('[data-truncated]').getByText('Output past 1 MiB per stream was not kept').waitFor();
      const shot = dialog.getByRole('img', { name: `The screen as run ${run.id} ended` });
      await shot.waitFor();
      assert.deepEqual(await shot.evaluate((img: HTMLImageElement) => [img.naturalWidth, img.naturalHeight]), [320, 200]);
      assert.equal(await dialog.locator('[data-run-screenshot] [data-screen-size]').textContent(), '320 × 200 pixels');
      const stdout = dialog.getByRole('region', { name: 'Standard output (stdout)' });
      const stderr = dialog.getByRole('region', { name: 'Standard error (stderr)' });
      assert.equal(await stderr.textContent(), 'Error: connect ECONNREFUSED\n');
      const look = (region: typeof stdout) => region.evaluate((element) => {
        const style = getComputedStyle(element);
        return { font: style.fontFamily, border: style.borderLeftColor, background: style.backgroundColor, scroll: style.overflowY };
      });
      const [out, err] = [await look(stdout), await look(stderr)];
      assert.match(out.font, /monospace/);
      assert.equal(err.font, out.font);
      assert.notEqual(err.border, out.border, 'stderr has its own colour');
      assert.notEqual(err.background, out.background);
      assert.equal(out.scroll, 'auto', 'a long output scrolls in its block');
      await page.keyboard.press('Escape');
      await dialog.waitFor({ state: 'detached' });
    } finally {
      await page.unroute(`**/api/machines/${machineId}/runs?*`);
      await page.unroute(`**/api/runs/${run.id}/screenshot`);
    }
  });

  test('files and processes: the simulated provider has none, and the page says how to get real machines', async () => {
    await page.reload();
    for (const section of ['#files', '#processes']) {
      const state = page.locator(`${section} [data-unavailable="not_supported"]`);
      await state.waitFor();
      assert.match(String(await state.textContent()), /MACHINE_PROVIDER=docker/);
    }
    assert.equal(await page.getByRole('button', { name: 'Upload' }).count(), 0, 'no upload form where there are no files');
    assert.equal(await page.getByRole('button', { name: 'Start process' }).count(), 0);
  });

  test('stop and start from the machine’s page: the screen says it shows while the machine runs, and comes back', async () => {
    const screen = page.locator('#screen');
    await screen.getByRole('img', { name: 'The screen of build-box' }).waitFor({ timeout: SETTLE_MS });
    await page.getByRole('button', { name: 'Stop', exact: true }).click();
    await page.locator('[data-status="stopped"]').waitFor({ timeout: SETTLE_MS });
    await screen.locator('[data-unavailable="invalid_state"]', { hasText: 'The machine is stopped.' }).waitFor();
    assert.equal(await screen.getByRole('img').count(), 0);
    assert.equal(await screen.getByRole('button', { name: 'Open live view' }).isVisible(), false, 'no live view of a stopped machine');
    await page.getByRole('button', { name: 'Start', exact: true }).click();
    await page.locator('[data-status="running"]').waitFor({ timeout: SETTLE_MS });
    await screen.getByRole('img', { name: 'The screen of build-box' }).waitFor({ timeout: SETTLE_MS });
  });

  test('the screen: the simulated provider’s picture at its size, read again every few seconds while shown, not once the page is left', async () => {
    await page.goto(`${live.baseUrl}/machines`);
    await page.getByRole('link', { name: 'build-box' }).click();
    const screen = page.locator('#screen');
    const picture = screen.getByRole('img', { name: 'The screen of build-box' });
    await picture.waitFor({ timeout: SETTLE_MS });
    assert.deepEqual(await picture.evaluate((img: HTMLImageElement) => [img.naturalWidth, img.naturalHeight]), [1024, 640]);
    assert.equal(await screen.locator('[data-screen-size]').textContent(), '1024 × 640 pixels');

    const reads: string[] = [];
    const onRequest = (request: Request) => void (request.url().includes(`/api/machines/${machineId}/screenshot`) && reads.push(request.url()));
    page.on('request', onRequest);
    try {
      await eventually(() => (reads.length >= 2 ? true : undefined), 'the picture read again by itself', SETTLE_MS);
      await screen.getByRole('button', { name: 'Refresh' }).click();
      await page.getByRole('link', { name: '← Machines' }).click();
      await page.waitForURL(`${live.baseUrl}/machines`);
      const count = reads.length;
      await new Promise((resolve) => setTimeout(resolve, QUIET_MS));
      assert.equal(reads.length, count, 'no picture read once the page is left');
    } finally {
      page.off('request', onRequest);
    }
  });

  test('“Open live view” creates a link and opens it in a new tab', async () => {
    await page.goto(`${live.baseUrl}/machines/${machineId}`);
    await page.locator('#screen').getByRole('img', { name: 'The screen of build-box' }).waitFor({ timeout: SETTLE_MS });
    const [tab] = await Promise.all([
      page.context().waitForEvent('page'),
      page.locator('#screen').getByRole('button', { name: 'Open live view' }).click(),
    ]);
    await tab.waitForURL(/\/live\/[^/]+$/);
    assert.equal(new URL(tab.url()).origin, live.baseUrl);
    assert.equal((await live.app.deps.db.selectFrom('live_views').select('token_hash').where('machine_id', '=', machineId).execute()).length, 1, 'one link created');
    await tab.close();
  });

  test('an unknown machine: a page that says so', async () => {
    await page.goto(`${live.baseUrl}/machines/mch_01jd0000000000000000000000`);
    await page.getByRole('heading', { level: 1, name: 'Machine not found' }).waitFor();
    await page.getByRole('link', { name: '← Machines' }).waitFor();
  });

  test('no page error or CSP violation on the way', () => {
    assert.deepEqual(problems, []);
  });
});
