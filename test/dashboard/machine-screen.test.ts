import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import type { Locator, Page } from 'playwright-core';
import { asSession, type TestUser } from '../support/app.ts';
import { eventually, type LiveApp } from '../support/browser.ts';
import { dockerUnavailable } from '../support/docker.ts';
import { MACHINE_ACTION_MS, openDockerMachinePage, type DockerMachinePage } from './docker-machine-page.ts';
import { layoutProblems, settled, unnamedControls, walkTabStops } from './page-audits.ts';

const skip = await dockerUnavailable();

/** Where the red xterm the tests open lies on the screen, well inside it. */
const INSIDE_XTERM = { x: 200, y: 200 } as const;

/** The RGBA of one pixel of a picture on the page, drawn on a canvas (same origin: the canvas is not tainted). */
function pixelOf(picture: Locator, at: { x: number; y: number }): Promise<number[]> {
  return picture.evaluate((img: HTMLImageElement, { x, y }) => {
    const canvas = document.createElement('canvas');
    canvas.width = img.naturalWidth;
    canvas.height = img.naturalHeight;
    const context = canvas.getContext('2d')!;
    context.drawImage(img, 0, 0);
    return [...context.getImageData(x, y, 1, 1).data];
  }, at);
}

const isRed = ([r = 0, g = 255, b = 255]: number[]) => r > 200 && g < 60 && b < 60;

/**
 * A real machine's screen on its dashboard page, in Chromium, on a real
 * Docker engine (CONTRACT 16): the picture at the machine's screen size, read
 * again as the screen changes; the screen a run ended on in its details; the
 * live view in a new tab; and a machine whose display is gone says so.
 */
describe('dashboard in Chromium: a Docker machine’s screen', { skip, timeout: 600_000 }, () => {
  let live: LiveApp;
  let user: TestUser;
  let page: Page;
  let problems: string[];
  let ui: DockerMachinePage;
  let machineId = '';

  before(async () => {
    ui = await openDockerMachinePage({ name: 'screen-box', screen: { width: 1024, height: 768 } });
    ({ live, user, page, problems, machineId } = ui);
  });
  after(() => ui?.close());

  const call = (method: 'GET' | 'POST', url: string, payload?: object) =>
    live.app.inject({ method, url, headers: asSession(user.session, live.baseUrl), ...(payload ? { payload } : {}) });
  /** A run through the API, to its end. */
  const runToEnd = async (command: string): Promise<{ id: string; status: string }> => {
    const queued = await call('POST', `/api/machines/${machineId}/runs`, { command });
    assert.equal(queued.statusCode, 201, queued.body);
    return eventually(async () => {
      const run = (await call('GET', `/api/runs/${queued.json().id}`)).json();
      return run.status === 'succeeded' || run.status === 'failed' ? run : undefined;
    }, command, MACHINE_ACTION_MS);
  };
  const screen = () => page.locator('#screen');
  const picture = () => screen().getByRole('img', { name: 'The screen of screen-box' });

  test('the machine’s page shows its screen at the machine’s screen size', async () => {
    await page.goto(`${live.baseUrl}/machines/${machineId}`);
    await picture().waitFor();
    assert.deepEqual(await picture().evaluate((img: HTMLImageElement) => [img.naturalWidth, img.naturalHeight]), [1024, 768]);
    assert.equal(await screen().locator('[data-screen-size]').textContent(), '1024 × 768 pixels');
    assert.equal(isRed(await pixelOf(picture(), INSIDE_XTERM)), false, 'no red window yet');
  });

  test('the picture follows the screen by itself: a red xterm opened by a command appears', async () => {
    await runToEnd(`xterm -geometry 80x30+40+40 -bg red > /dev/null 2>&1 &`);
    await eventually(async () => (isRed(await pixelOf(picture(), INSIDE_XTERM)) ? true : undefined), 'the red window in the picture', MACHINE_ACTION_MS);
  });

  test('a run’s details show the screen as the run ended', async () => {
    const run = await runToEnd('echo looked');
    // A run started through the API is listed once the page reads its runs again.
    await page.reload();
    await page.getByRole('button', { name: `Output of run ${run.id}` }).click();
    const dialog = page.getByRole('dialog', { name: 'Run output' });
    const shot = dialog.getByRole('img', { name: `The screen as run ${run.id} ended` });
    await shot.waitFor();
    assert.deepEqual(await shot.evaluate((img: HTMLImageElement) => [img.naturalWidth, img.naturalHeight]), [1024, 768]);
    assert.equal(isRed(await pixelOf(shot, INSIDE_XTERM)), true, 'the red window was on the screen as the run ended');
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
  });

  test('“Open live view” opens the live view in a new tab', async () => {
    const [tab] = await Promise.all([
      page.context().waitForEvent('page'),
      screen().getByRole('button', { name: 'Open live view' }).click(),
    ]);
    await tab.waitForURL(/\/live\/[^/]+$/);
    await tab.locator('#state', { hasText: 'Live.' }).waitFor({ timeout: 20_000 });
    await tab.close();
  });

  test('with its screen shown, the page fits 375 and 1280 px, names every control and shows focus', async () => {
    for (const width of [375, 1280]) {
      await page.setViewportSize({ width, height: 800 });
      await page.goto(`${live.baseUrl}/machines/${machineId}`);
      await picture().waitFor();
      await settled(page);
      const found = [...(await layoutProblems(page)), ...(await unnamedControls(page))];
      const stops = await walkTabStops(page);
      found.push(...stops.flatMap((stop) => [...(stop.problem ? [`${stop.label}: ${stop.problem}`] : []), ...(/""$/.test(stop.label) ? [`${stop.label}: no name`] : [])]));
      assert.ok(stops.some((stop) => stop.label === 'button "Open live view"'), `${width} px: Open live view is a tab stop`);
      const box = (await picture().boundingBox())!;
      assert.ok(box.width <= width, `${width} px: the picture fits (${box.width} px wide)`);
      assert.deepEqual(found, [], `${width} px`);
    }
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  test('a machine whose display is gone says it has no display, and its run keeps no picture', async () => {
    await page.goto(`${live.baseUrl}/machines/${machineId}`);
    await picture().waitFor();
    const run = await runToEnd('pkill -TERM Xvfb; sleep 1');
    const state = screen().locator('[data-unavailable="no_display"]');
    await state.waitFor();
    assert.match(String(await state.textContent()), /This machine has no display/);
    assert.equal(await screen().getByRole('img').count(), 0, 'no broken picture');
    assert.equal(await screen().getByRole('button', { name: 'Open live view' }).isVisible(), false);

    assert.equal((await call('GET', `/api/runs/${run.id}/screenshot`)).statusCode, 404);
    await page.reload();
    await state.waitFor();
    await page.getByRole('button', { name: `Output of run ${run.id}` }).click();
    const dialog = page.getByRole('dialog', { name: 'Run output' });
    await dialog.locator('[data-exit-code]').waitFor();
    assert.equal(await dialog.locator('[data-run-screenshot]').innerHTML(), '', 'nothing shown for a run without a picture');
    assert.equal(await dialog.getByRole('alert').count(), 0);
    await page.keyboard.press('Escape');
  });

  test('no page error or CSP violation on the way', () => {
    assert.deepEqual(problems, []);
  });
});
