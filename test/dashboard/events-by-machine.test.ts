import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { asSession, settled as jobsSettled, type TestUser } from '../support/app.ts';
import { eventually, openSignedInPage, type LiveApp, type SignedInPage } from '../support/browser.ts';
import { BOOT_MS } from '../support/machines.ts';
import { layoutProblems, settled } from './page-audits.ts';

/**
 * Issue 38 point 8, in Chromium: the Events page showed only each event's type
 * and id and filtered only by type. Each row now names its machine (or run),
 * linking to it; a machine filter is kept in the address; a machine's page
 * lists its own events.
 */
describe('dashboard in Chromium: events by machine', () => {
  let live: LiveApp;
  let user: TestUser;
  let page: Page;
  let problems: string[];
  let ui: SignedInPage;
  const machines: Array<{ id: string; name: string }> = [];
  let runId = '';

  before(async () => {
    ui = await openSignedInPage({ app: { env: { MACHINE_BOOT_MS: String(BOOT_MS) } }, user: { email: 'events-by-machine@example.com' } });
    ({ live, user, page, problems } = ui);
    for (const name of ['web-box', 'db-box']) {
      const response = await call('POST', '/api/machines', { name, size: 'small' });
      assert.equal(response.statusCode, 201, response.body);
      machines.push(response.json());
    }
    live.clock.advance(BOOT_MS);
    await jobsSettled(live);
    const run = await call('POST', `/api/machines/${machines[0]!.id}/runs`, { command: 'echo hi' });
    assert.equal(run.statusCode, 201, run.body);
    runId = run.json().id;
    await jobsSettled(live);
    assert.equal((await call('POST', `/api/machines/${machines[1]!.id}/stop`)).statusCode, 200);
    await jobsSettled(live);
  });
  after(() => ui?.close());

  function call(method: 'GET' | 'POST', url: string, payload?: object) {
    return live.app.inject({ method, url, headers: asSession(user.session, live.baseUrl), ...(payload ? { payload } : {}) });
  }

  test('each row names its machine, linking to its page, or the run and its machine', async () => {
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.goto(`${live.baseUrl}/events`);
    await settled(page);
    const events = (await call('GET', '/api/events')).json().data as Array<{ id: string; type: string; data: { machine: { id: string; name: string } } }>;
    assert.ok(events.length >= 4, 'two created, a run, a stop');
    for (const event of events) {
      const link = page.locator(`tr[data-event-id="${event.id}"] td[data-label="About"] a`);
      assert.equal(await link.textContent(), event.data.machine.name, `${event.type} names its machine`);
      assert.equal(await link.getAttribute('href'), `/machines/${event.data.machine.id}`);
      assert.equal(await link.getAttribute('title'), event.data.machine.id, 'the id on hover');
    }
    const runRow = page.locator('tr[data-event-id]', { has: page.locator(`[data-run-id="${runId}"]`) });
    assert.equal(await runRow.count(), 1);
    assert.equal((await runRow.locator('td[data-label="About"]').innerText()).trim(), 'run on web-box');

    await runRow.getByRole('link', { name: 'web-box' }).click();
    await page.waitForURL(`${live.baseUrl}/machines/${machines[0]!.id}`);
    assert.deepEqual(problems, []);
  });

  test('the machine filter lists only its events and stays in the address, through a reload', async () => {
    const [web, db] = machines;
    await page.goto(`${live.baseUrl}/events`);
    await settled(page);
    const filter = page.getByRole('combobox', { name: 'Filter by machine' });
    await filter.locator(`option[value="${db!.id}"]`, { hasText: 'db-box' }).waitFor({ state: 'attached' });
    await filter.selectOption(db!.id);
    await page.waitForURL(`${live.baseUrl}/events?machine=${db!.id}`);
    const names = () => page.locator('tr[data-event-id] td[data-label="About"] a').allTextContents();
    await eventually(async () => {
      const shown = await names();
      return shown.length > 0 && shown.every((name) => name === 'db-box') ? true : undefined;
    }, "only db-box's events");
    const expected = (await call('GET', `/api/events?machineId=${db!.id}`)).json().data.map((event: { id: string }) => event.id);
    const listed = async () => page.locator('tr[data-event-id]').evaluateAll((rows) => rows.map((row) => (row as HTMLElement).dataset['eventId']));
    assert.deepEqual(await listed(), expected);

    await page.reload();
    await settled(page);
    assert.equal(await page.getByRole('combobox', { name: 'Filter by machine' }).inputValue(), db!.id, 'the filter is read from the address');
    assert.deepEqual(await listed(), expected);

    // Both filters together, then back to every machine.
    await page.getByRole('combobox', { name: 'Filter by event type' }).selectOption('machine.stopped');
    await page.waitForURL(`${live.baseUrl}/events?type=machine.stopped&machine=${db!.id}`);
    await eventually(async () => ((await page.locator('tr[data-event-id]').count()) === 1 ? true : undefined), 'its one machine.stopped event');
    await page.getByRole('combobox', { name: 'Filter by machine' }).selectOption('');
    await page.getByRole('combobox', { name: 'Filter by event type' }).selectOption('');
    await page.waitForURL(`${live.baseUrl}/events`);
    await eventually(async () => ((await names()).includes(web!.name) ? true : undefined), 'every machine again');
    assert.deepEqual(problems, []);
  });

  test("a machine's page lists its own events, and links to all of them on the Events page", async () => {
    const [web] = machines;
    await page.goto(`${live.baseUrl}/machines/${web!.id}`);
    const section = page.locator('#machine-events');
    await section.locator('tr[data-event-id]').first().waitFor();
    const expected = (await call('GET', `/api/events?machineId=${web!.id}&limit=10`)).json().data.map((event: { id: string }) => event.id);
    assert.ok(expected.length >= 2, 'machine.created and its run at least');
    await eventually(async () => {
      const shown = await section.locator('tr[data-event-id]').evaluateAll((rows) => rows.map((row) => (row as HTMLElement).dataset['eventId']));
      return JSON.stringify(shown) === JSON.stringify(expected) ? true : undefined;
    }, "the machine's events, newest first");
    await section.getByRole('link', { name: 'All its events' }).click();
    await page.waitForURL(`${live.baseUrl}/events?machine=${web!.id}`);
    assert.equal(await page.getByRole('combobox', { name: 'Filter by machine' }).inputValue(), web!.id);
    assert.deepEqual(problems, []);
  });

  for (const width of [375, 1280]) {
    test(`the Events page with its filters fits ${width} px`, async () => {
      await page.setViewportSize({ width, height: 900 });
      await page.goto(`${live.baseUrl}/events?machine=${machines[0]!.id}`);
      await settled(page);
      assert.deepEqual(await layoutProblems(page), []);
      const filter = await page.getByRole('combobox', { name: 'Filter by machine' }).boundingBox();
      assert.ok(filter && filter.x >= 0 && filter.x + filter.width <= width, 'the machine filter is in view');
    });
  }
});
