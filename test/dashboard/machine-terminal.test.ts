import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { asSession, type TestUser } from '../support/app.ts';
import { eventually, newContext, watchConsole, type LiveApp } from '../support/browser.ts';
import { dockerUnavailable } from '../support/docker.ts';
import { pathOf } from '../support/machines.ts';
import { MACHINE_ACTION_MS, openDockerMachinePage, type DockerMachinePage } from './docker-machine-page.ts';

const skip = await dockerUnavailable();

/**
 * The machine's terminal and control of its screen in Chromium, on a real
 * Docker machine (CONTRACT 19): the owner opens a terminal on the machine's
 * page, runs `ls /`, resizes it, gets it back after a reload; takes control of
 * the screen and types into an xterm there; a shared live-view link cannot type.
 */
describe('dashboard in Chromium: a Docker machine’s terminal and control of its screen', { skip, timeout: 600_000 }, () => {
  let live: LiveApp;
  let user: TestUser;
  let page: Page;
  let problems: string[];
  let ui: DockerMachinePage;
  let machineId = '';

  before(async () => {
    ui = await openDockerMachinePage({ name: 'terminal-box', screen: { width: 1024, height: 768 } });
    ({ live, user, page, problems, machineId } = ui);
  });
  after(() => ui?.close());

  const call = (method: 'GET' | 'POST', url: string, payload?: object) =>
    live.app.inject({ method, url, headers: asSession(user.session, live.baseUrl), ...(payload ? { payload } : {}) });
  /** A run through the API, to its end. */
  const runToEnd = async (command: string): Promise<{ status: string; exitCode: number | null; stdout: string }> => {
    const queued = await call('POST', `/api/machines/${machineId}/runs`, { command });
    assert.equal(queued.statusCode, 201, queued.body);
    return eventually(async () => {
      const run = (await call('GET', `/api/runs/${queued.json().id}`)).json();
      return run.status === 'succeeded' || run.status === 'failed' ? run : undefined;
    }, command, MACHINE_ACTION_MS);
  };
  const exists = async (path: string) => (await runToEnd(`test -e ${path}`)).exitCode === 0;
  const terminal = () => page.locator('#terminal [data-terminal]');
  const terminalText = () => terminal().locator('.xterm-rows').innerText();

  test('the owner opens the terminal, runs `ls /`, and the shell sees its size change when the page does', async () => {
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.goto(`${live.baseUrl}/machines/${machineId}`);
    await page.getByRole('button', { name: 'Open terminal' }).click();
    await page.locator('#terminal [data-terminal="open"]').waitFor();
    await terminal().click();
    await page.keyboard.type('ls /\n');
    await eventually(async () => (/\bproc\b[\s\S]*\busr\b/.test(await terminalText()) ? true : undefined), 'ls / in the terminal', MACHINE_ACTION_MS);

    const size = async () => [Number(await terminal().getAttribute('data-rows')), Number(await terminal().getAttribute('data-cols'))];
    const [, wideCols] = await size();
    await page.setViewportSize({ width: 700, height: 900 });
    const [rows, cols] = await eventually(async () => {
      const now = await size();
      return now[1]! < wideCols! ? now : undefined;
    }, 'fewer columns in a narrower page', 10_000);
    await page.keyboard.type('clear; stty size\n');
    await eventually(async () => ((await terminalText()).includes(`${rows} ${cols}`) ? true : undefined), `stty size: ${rows} ${cols}`, MACHINE_ACTION_MS);
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  test('copy and paste: Ctrl+Shift+C copies the selection, Ctrl+Shift+V pastes', async () => {
    await ui.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: live.baseUrl });
    await page.evaluate(() => navigator.clipboard.writeText('echo pasted-$((3 * 3))'));
    await terminal().click();
    await page.keyboard.press('Control+Shift+V');
    await page.keyboard.press('Enter');
    await eventually(async () => ((await terminalText()).includes('pasted-9') ? true : undefined), 'the pasted command ran', MACHINE_ACTION_MS);
    // A triple click selects the line the output is on. The shell's next prompt can move that line after it is
    // measured (and the click then selects another): measured again on each try.
    const copied = await eventually(async () => {
      const line = terminal().locator('.xterm-rows > div', { hasText: /^pasted-9\s*$/ }).last();
      // The mouse clicks where the page shows: a line below the fold is scrolled to first.
      await line.scrollIntoViewIfNeeded();
      const row = (await line.boundingBox())!;
      await page.mouse.click(row.x + 10, row.y + row.height / 2, { clickCount: 3 });
      await page.keyboard.press('Control+Shift+C');
      await new Promise((resolve) => setTimeout(resolve, 200));
      const text = await page.evaluate(() => navigator.clipboard.readText());
      return text.includes('pasted-9') ? text : undefined;
    }, 'the selection copied', 10_000);
    assert.match(copied, /^pasted-9\s*$/);
  });

  test('a reload gets the same shell back, with what it printed', async () => {
    await terminal().click();
    await page.keyboard.type('export MARK=kept-$((20 + 22)); echo $MARK\n');
    await eventually(async () => ((await terminalText()).includes('kept-42') ? true : undefined), 'the mark', MACHINE_ACTION_MS);
    await page.reload();
    await page.locator('#terminal [data-terminal="open"]').waitFor();
    // xterm.js draws nothing while it is off the screen; a reload restores the page's scroll, which can leave it there.
    await terminal().scrollIntoViewIfNeeded();
    await eventually(async () => ((await terminalText()).includes('kept-42') ? true : undefined), 'the scrollback after the reload', MACHINE_ACTION_MS);
    await terminal().click();
    await page.keyboard.type('echo "again $MARK"\n');
    await eventually(async () => ((await terminalText()).includes('again kept-42') ? true : undefined), 'the same shell', MACHINE_ACTION_MS);
  });

  test('the owner takes control of the screen and types into an xterm on it; a shared live-view link cannot type', async () => {
    // An xterm over the whole screen, so that any click on it focuses it.
    await runToEnd('xterm -geometry 200x70+0+0 -bg red > /dev/null 2>&1 &');
    await page.goto(`${live.baseUrl}/machines/${machineId}`);
    await page.locator('#screen').getByRole('button', { name: 'Take control' }).click();
    const control = page.locator('#screen [data-screen-control="live"] canvas');
    await control.waitFor();
    const box = (await control.boundingBox())!;
    await page.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
    await page.keyboard.type('touch /tmp/typed-by-owner\n', { delay: 20 });
    await eventually(async () => ((await exists('/tmp/typed-by-owner')) ? true : undefined), 'the owner’s command ran', MACHINE_ACTION_MS);

    const link = (await call('POST', `/api/machines/${machineId}/live-view`)).json();
    const viewer = await (await newContext(ui.browser)).newPage();
    const viewerProblems = watchConsole(viewer);
    await viewer.goto(`${live.baseUrl}${pathOf(link.url)}`);
    await viewer.locator('#state', { hasText: 'Live.' }).waitFor({ timeout: 20_000 });
    const seen = (await viewer.locator('#screen canvas').boundingBox())!;
    await viewer.mouse.click(seen.x + seen.width / 2, seen.y + seen.height / 2);
    await viewer.keyboard.type('touch /tmp/typed-by-viewer\n', { delay: 20 });
    // The owner types after the viewer: once the owner's command has run, the viewer's would have too.
    await page.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
    await page.keyboard.type('touch /tmp/typed-after\n', { delay: 20 });
    await eventually(async () => ((await exists('/tmp/typed-after')) ? true : undefined), 'the owner’s second command ran', MACHINE_ACTION_MS);
    assert.equal(await exists('/tmp/typed-by-viewer'), false, 'the live-view link typed nothing');
    assert.deepEqual(viewerProblems, []);
    await viewer.close();

    await page.locator('#screen').getByRole('button', { name: 'Stop control' }).click();
    await page.locator('#screen').getByRole('img', { name: 'The screen of terminal-box' }).waitFor();
  });

  test('no page error or CSP violation on the way', () => {
    assert.deepEqual(problems, []);
  });
});
