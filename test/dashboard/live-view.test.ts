import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { launchBrowser, newContext, startLiveApp, watchConsole, type LiveApp } from '../support/browser.ts';
import { DOCKER_TEST_ENV, dockerUnavailable, removeMachineContainers } from '../support/docker.ts';
import { newOwner, pathOf, type Owner } from '../support/machines.ts';
import { eventually } from '../support/receiver.ts';

const skip = await dockerUnavailable();

/**
 * CONTRACT 16 in Chromium against a real machine: the live-view link shows
 * the screen as it changes (noVNC over the service's WebSocket, view-only),
 * and a link that expires or is revoked ends the stream, saying why.
 */
describe('live view of a real machine, in Chromium', { skip, timeout: 300_000 }, () => {
  let live: LiveApp;
  let owner: Owner;
  let browser: Browser;
  let machineId: string;

  before(async () => {
    live = await startLiveApp({ realClock: true, env: { MACHINE_PROVIDER: 'docker', ...DOCKER_TEST_ENV } });
    owner = await newOwner(live);
    browser = await launchBrowser();
    const created = await owner.call('POST', '/api/machines', { name: 'watched', screen: { width: 800, height: 600 } });
    machineId = created.json().id;
    await eventually(async () => ((await owner.call('GET', `/api/machines/${machineId}`)).json().status === 'running' ? true : undefined), 60_000, 'running');
    // The page shows a picture of the screen, which waits while a just-booted machine puts its desktop up (up to
    // 10 s on a loaded host): past the browser's navigation timeout. One screenshot first: the desktop is up.
    assert.equal((await owner.call('GET', `/api/machines/${machineId}/screenshot`)).statusCode, 200);
  });
  after(async () => {
    await browser?.close();
    const machines = live ? await live.app.deps.db.selectFrom('machines').select('id').execute() : [];
    await live?.close();
    await removeMachineContainers(machines.map((machine) => machine.id));
  });

  const run = async (command: string) => {
    const queued = (await owner.call('POST', `/api/machines/${machineId}/runs`, { command })).json();
    return eventually(async () => {
      const current = (await owner.call('GET', `/api/runs/${queued.id}`)).json();
      return current.status === 'succeeded' || current.status === 'failed' ? current : undefined;
    }, 60_000, command);
  };

  /** What the page's canvas shows now, as a data URL. */
  const frame = (page: Page) => page.locator('#screen canvas').evaluate((canvas: HTMLCanvasElement) => canvas.toDataURL('image/png'));

  async function openLink(): Promise<{ page: Page; problems: string[] }> {
    const link = (await owner.call('POST', `/api/machines/${machineId}/live-view`)).json();
    const page = await (await newContext(browser)).newPage();
    const problems = watchConsole(page);
    // A failed module or stream says which (net::ERR_NETWORK_CHANGED: see .ci/run on IPv6 and new interfaces).
    page.on('requestfailed', (request) => problems.push(`failed: ${request.url()} ${request.failure()?.errorText}`));
    page.on('response', (response) => void (response.status() >= 400 && response.url().includes('/live/') && problems.push(`${response.status()}: ${response.url()}`)));
    await page.goto(`${live.baseUrl}${pathOf(link.url)}`);
    try {
      await page.locator('#state', { hasText: 'Live.' }).waitFor({ timeout: 20_000 });
    } catch (error) {
      throw new Error(`not live: "${await page.locator('#state').textContent()}"; ${problems.join('; ')}`, { cause: error });
    }
    return { page, problems };
  }

  test('the link shows the screen live: it changes when a command changes what is on it, and a click in the page changes nothing in the machine', async () => {
    const { page, problems } = await openLink();
    const before = await frame(page);
    await run('xterm -geometry 60x20+50+50 -bg red > /dev/null 2>&1 &');
    const changed = await eventually(async () => {
      const now = await frame(page);
      return now !== before ? now : undefined;
    }, 20_000, 'the frame to change');
    assert.notEqual(changed, before);

    // View-only: a click and typing in the page reach nothing in the machine.
    const pointer = async () => (await run('xdotool getmouselocation --shell | head -2 | tr "\\n" " "')).stdout;
    const was = await pointer();
    const box = (await page.locator('#screen canvas').boundingBox())!;
    await page.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
    await page.keyboard.type('should-not-arrive');
    assert.equal(await pointer(), was, 'the pointer did not move');
    assert.deepEqual(problems, []);
  });

  test('a revoked link ends the stream and says so; an expired one too', async () => {
    const { page } = await openLink();
    assert.equal((await owner.call('DELETE', `/api/machines/${machineId}/live-view`)).statusCode, 204);
    await page.locator('#state', { hasText: 'the link was revoked' }).waitFor({ timeout: 15_000 });
    assert.equal(await page.locator('main').getAttribute('data-state'), 'ended');

    const expiring = await openLink();
    // Its 15 minutes, passed: the link expires half a second from now, on the page as in the database.
    const soon = Date.now() + 500;
    await live.app.deps.db.updateTable('live_views').set({ expires_at: soon }).execute();
    await expiring.page.evaluate((at) => void (document.querySelector('main')!.dataset.expiresAt = new Date(at).toISOString()), soon);
    await expiring.page.locator('#state', { hasText: 'the link expired' }).waitFor({ timeout: 15_000 });
  });
});
