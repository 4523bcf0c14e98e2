import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { inTransaction } from '../../src/db/transaction.ts';
import { emitEvent } from '../../src/event-webhooks/outbox.ts';
import { asSession, type TestUser } from '../support/app.ts';
import { eventually, openSignedInPage, type LiveApp, type SignedInPage } from '../support/browser.ts';
import { startHttpsReceiver, type HttpsReceiver } from '../support/https-receiver.ts';
import { startReceiver } from '../support/receiver.ts';

/** Issue 12 in the dashboard: the attempt log, the filters, recover, replay, re-enabling, the Events page. */
describe('dashboard in Chromium: event history', () => {
  let live: LiveApp;
  let receiver: HttpsReceiver;
  let user: TestUser;
  let page: Page;
  let problems: string[];
  let ui: SignedInPage;

  before(async () => {
    // Three attempts 100 ms apart: a delivery fails for good within a second.
    // A minute's timeout: an attempt that a receiver holds keeps its delivery pending that long.
    ui = await openSignedInPage({ app: { realClock: true, env: { WEBHOOK_MAX_ATTEMPTS: '3', WEBHOOK_RETRY_DELAYS: '100ms', WEBHOOK_TIMEOUT_MS: '60000' } } });
    ({ live, user, page, problems } = ui);
    receiver = await startHttpsReceiver();
  });
  after(async () => {
    await receiver?.close();
    await ui?.close();
  });

  const call = (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: Record<string, unknown>) =>
    live.app.inject({ method, url, headers: asSession(user.session, live.baseUrl), ...(payload ? { payload } : {}) });
  const emit = (type: 'machine.created' | 'machine.stopped') =>
    inTransaction(live.app.deps.database, (tx) => emitEvent(live.app.deps, tx, { accountId: user.id, type, data: { machine: { id: 'mch_ui' }, detail: {} } }));
  const deliveries = async (endpointId: string) => (await call('GET', `/api/event-webhooks/deliveries?endpoint=${endpointId}`)).json().data as Array<{ id: string; eventId: string; status: string }>;
  const settledStatus = (endpointId: string, eventId: string, status: string) =>
    eventually(async () => ((await deliveries(endpointId)).find((d) => d.eventId === eventId)?.status === status ? true : undefined), `delivery ${status}`, 10_000);

  test('the attempt log in the delivery view, and the status filter', async () => {
    const endpoint = (await call('POST', '/api/event-webhooks', { url: `${receiver.origin}/log`, events: ['machine.created'], description: 'Log' })).json();
    receiver.answer = 503;
    const failed = await emit('machine.created');
    await settledStatus(endpoint.id, failed.id, 'failed');
    receiver.answer = 200;
    const delivered = await emit('machine.created');
    await settledStatus(endpoint.id, delivered.id, 'delivered');

    await page.goto(`${live.baseUrl}/event-webhooks/${endpoint.id}`);
    await page.getByRole('heading', { name: 'Log', exact: true }).waitFor();
    const failedId = (await deliveries(endpoint.id)).find((d) => d.eventId === failed.id)!.id;
    await page.getByRole('button', { name: `Details of delivery ${failedId}` }).click();
    const dialog = page.getByRole('dialog', { name: 'Delivery' });
    const log = dialog.getByRole('table', { name: 'Attempt log' });
    await log.waitFor();
    assert.equal(await log.locator('tbody tr').count(), 3, 'three attempts');
    assert.deepEqual(await log.locator('tbody tr').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-attempt'))), ['1', '2', '3']);
    assert.ok((await log.textContent())!.includes('HTTP 503'));
    await dialog.locator('.dialog__footer').getByRole('button', { name: 'Close', exact: true }).click();

    await page.getByRole('combobox', { name: 'Filter by status' }).selectOption('failed');
    await page.locator(`tr[data-delivery-id]`).first().waitFor();
    await eventually(async () => ((await page.locator('tr[data-delivery-id]').count()) === 1 ? true : undefined), 'one failed delivery listed');
    assert.equal(await page.locator('tr[data-delivery-id]').first().getAttribute('data-status'), 'failed');
    await page.getByRole('combobox', { name: 'Filter by status' }).selectOption('pending');
    await page.getByText('No matching deliveries').waitFor();
    await page.getByRole('combobox', { name: 'Filter by status' }).selectOption('');
    await eventually(async () => ((await page.locator('tr[data-delivery-id]').count()) === 2 ? true : undefined), 'both listed again');
  });

  test('the endpoint page: deliveries first, behind an inline filter bar, each naming the machine or run it is about (they were ~900 px down, and rows of one type looked alike)', async () => {
    const endpoint = (await call('POST', '/api/event-webhooks', { url: `${receiver.origin}/named`, events: ['machine.created', 'run.failed'], description: 'Named' })).json();
    receiver.answer = 200;
    const machine = { id: 'mch_01jd0000000000000000000042', name: 'build-box', status: 'running', size: 'small', externalId: '', labels: {} };
    const created = await inTransaction(live.app.deps.database, (tx) => emitEvent(live.app.deps, tx, { accountId: user.id, type: 'machine.created', data: { machine, detail: {} } }));
    const failedRun = await inTransaction(live.app.deps.database, (tx) => emitEvent(live.app.deps, tx, {
      accountId: user.id, type: 'run.failed', data: { run: { id: 'run_01jd0000000000000000000007', source: 'manual', sourceId: null, status: 'failed', output: 'exit 1' }, machine: { id: machine.id, name: machine.name, externalId: '', labels: {} } },
    }));
    await settledStatus(endpoint.id, created.id, 'delivered');
    await settledStatus(endpoint.id, failedRun.id, 'delivered');

    await page.setViewportSize({ width: 1280, height: 800 });
    await page.goto(`${live.baseUrl}/event-webhooks/${endpoint.id}`);
    const rowOf = (type: string) => page.locator('tr[data-delivery-id]').filter({ hasText: type });
    await rowOf('machine.created').locator('[data-subject="build-box"]').waitFor();
    assert.equal(await rowOf('machine.created').locator('[data-subject]').getAttribute('title'), machine.id, 'the machine id on hover');
    await rowOf('run.failed').locator('[data-subject="run on build-box"]').waitFor();
    assert.equal(await rowOf('run.failed').locator('[data-subject]').getAttribute('title'), 'run_01jd0000000000000000000007');

    const top = (selector: string) => page.locator(selector).evaluate((element) => element.getBoundingClientRect().top + scrollY);
    assert.ok(await top('#deliveries') < await top('#settings'), 'deliveries come before the settings');
    assert.ok(await top('#deliveries') < 450, `the deliveries start within the first screen (${await top('#deliveries')} px)`);
    const bar = page.getByRole('group', { name: 'Filter deliveries' });
    const boxes = await Promise.all([bar.getByRole('combobox', { name: 'Filter by status' }), bar.getByRole('combobox', { name: 'Filter by event type' }), bar.getByRole('button', { name: 'Refresh' })].map((control) => control.boundingBox()));
    assert.ok(boxes.every((box) => box !== null && Math.abs(box.y - boxes[0]!.y) <= 4), 'the filters and Refresh share one line');
    assert.ok(boxes.slice(0, 2).every((box) => box!.width < 320), `the filters are as wide as their choices (${boxes.map((box) => Math.round(box!.width)).join(', ')} px)`);
  });

  test('the attempt log dialog: wide at 1280 px with each time on one line; at 375 px it opens with its title and close button in view (they were scrolled off)', async () => {
    const endpoint = (await call('POST', '/api/event-webhooks', { url: `${receiver.origin}/attempts`, events: ['machine.created'], description: 'Attempts' })).json();
    receiver.answer = 503;
    const failed = await emit('machine.created');
    await settledStatus(endpoint.id, failed.id, 'failed');
    receiver.answer = 200;
    const deliveryId = (await deliveries(endpoint.id)).find((d) => d.eventId === failed.id)!.id;

    await page.setViewportSize({ width: 1280, height: 800 });
    await page.goto(`${live.baseUrl}/event-webhooks/${endpoint.id}`);
    await page.getByRole('button', { name: `Details of delivery ${deliveryId}` }).click();
    let dialog = page.getByRole('dialog', { name: 'Delivery' });
    const log = dialog.getByRole('table', { name: 'Attempt log' });
    await log.waitFor();
    const width = (await dialog.boundingBox())!.width;
    assert.ok(width >= 1000, `the dialog is ${Math.round(width)} px wide at 1280 px (was 720)`);
    const times = await log.locator('td[data-label="Time"]').evaluateAll((cells) => cells.map((cell) => cell.getBoundingClientRect().height / parseFloat(getComputedStyle(cell).lineHeight)));
    assert.equal(times.length, 3);
    assert.ok(times.every((lines) => lines < 2.5), `each time on one line (row heights in lines: ${times.map((lines) => lines.toFixed(1)).join(', ')})`);
    await page.keyboard.press('Escape');

    await page.setViewportSize({ width: 375, height: 812 });
    await page.goto(`${live.baseUrl}/event-webhooks/${endpoint.id}`);
    await page.getByRole('button', { name: `Details of delivery ${deliveryId}` }).click();
    dialog = page.getByRole('dialog', { name: 'Delivery' });
    await dialog.getByRole('table', { name: 'Attempt log' }).waitFor();
    const inView = async () => {
      const title = (await dialog.getByRole('heading', { name: 'Delivery' }).boundingBox())!;
      const close = (await dialog.getByRole('button', { name: 'Close', exact: true }).first().boundingBox())!;
      return [title, close].every((box) => box.y >= 0 && box.y + box.height <= 812 && box.x >= 0 && box.x + box.width <= 375);
    };
    assert.ok(await inView(), 'the title and the close button are in view as the dialog opens');
    assert.equal(await page.evaluate(() => document.activeElement?.getAttribute('aria-label')), 'Close', 'focus starts on the close button, at the top');
    // Down to the footer's Close: the header stays.
    await dialog.locator('.dialog__footer').getByRole('button', { name: 'Close', exact: true }).focus();
    assert.ok(await inView(), 'still in view with the dialog scrolled to its end');
    await page.keyboard.press('Escape');
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  test('"Recover failed since…" sends the failed deliveries again', async () => {
    const endpoint = (await call('POST', '/api/event-webhooks', { url: `${receiver.origin}/recover`, events: ['machine.created'], description: 'Recover' })).json();
    receiver.answer = 500;
    const event = await emit('machine.created');
    await settledStatus(endpoint.id, event.id, 'failed');
    receiver.answer = 200;
    await page.goto(`${live.baseUrl}/event-webhooks/${endpoint.id}`);
    await page.getByRole('heading', { name: 'Recover', exact: true }).waitFor();
    await page.getByRole('button', { name: 'Recover failed since…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Recover failed deliveries' });
    await dialog.getByLabel('Since').waitFor();
    await dialog.getByRole('button', { name: 'Recover', exact: true }).click();
    await page.getByText('1 failed delivery sent again.').waitFor();
    await settledStatus(endpoint.id, event.id, 'delivered');
    assert.equal(receiver.received.filter((r) => r.path === '/recover' && r.body.includes(event.id)).length, 4, 'three failed attempts, then the recovered one');
  });

  test('"Replay missing since…" delivers what the endpoint missed while paused', async () => {
    receiver.answer = 200;
    const endpoint = (await call('POST', '/api/event-webhooks', { url: `${receiver.origin}/replay`, events: ['machine.stopped'], description: 'Replay' })).json();
    await call('PATCH', `/api/event-webhooks/${endpoint.id}`, { enabled: false });
    const missed = await emit('machine.stopped');
    await call('PATCH', `/api/event-webhooks/${endpoint.id}`, { enabled: true });
    assert.deepEqual(await deliveries(endpoint.id), []);
    await page.goto(`${live.baseUrl}/event-webhooks/${endpoint.id}`);
    await page.getByRole('heading', { name: 'Replay', exact: true }).waitFor();
    await page.getByRole('button', { name: 'Replay missing since…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Replay missing events' });
    await dialog.getByRole('button', { name: 'Replay', exact: true }).click();
    await page.getByText('1 missed event queued for delivery.').waitFor();
    await settledStatus(endpoint.id, missed.id, 'delivered');
    assert.equal(receiver.received.filter((r) => r.path === '/replay' && r.body.includes(missed.id)).length, 1);
  });

  test('a disabled endpoint shows why, and "Re-enable" clears it', async () => {
    const endpoint = (await call('POST', '/api/event-webhooks', { url: `${receiver.origin}/disabled`, description: 'Disabled' })).json();
    // The state auto-disable leaves (its own test runs five days on a controlled clock).
    const now = Date.now();
    await live.app.deps.db.updateTable('event_endpoints').set({ enabled: 0, disabled_reason: 'failing', disabled_at: now, failing_since: now - 5 * 86_400_000 }).where('id', '=', endpoint.id).execute();
    await live.app.deps.db.updateTable('job_lanes').set({ paused: 1 }).where('lane', '=', endpoint.id).execute();
    await page.goto(`${live.baseUrl}/event-webhooks/${endpoint.id}`);
    const alert = page.locator('#disabled-reason');
    await alert.getByText('Disabled because it kept failing.').waitFor();
    await alert.getByRole('button', { name: 'Re-enable' }).click();
    await page.getByText('Endpoint re-enabled').waitFor();
    const after = (await call('GET', `/api/event-webhooks/${endpoint.id}`)).json();
    assert.deepEqual([after.enabled, after.disabledReason, after.disabledAt], [true, null, null]);
    assert.equal(await alert.count(), 0);
  });

  test('the Events page lists recent events with their deliveries', async () => {
    await page.goto(`${live.baseUrl}/event-webhooks`);
    await page.getByRole('link', { name: 'Event history' }).click();
    await page.waitForURL(`${live.baseUrl}/events`);
    const [newest] = (await call('GET', '/api/events')).json().data as Array<{ id: string; type: string }>;
    const row = page.locator(`tr[data-event-id="${newest!.id}"]`);
    await row.waitFor().catch((error: unknown) => {
      throw new Error(`${String(error)} ${problems.join(' | ')}`);
    });
    await row.getByRole('button', { name: `Deliveries of event ${newest!.id}` }).click();
    const dialog = page.getByRole('dialog', { name: `Event ${newest!.type}` });
    await dialog.getByRole('table', { name: 'Deliveries of this event' }).waitFor();
    assert.ok((await dialog.getByLabel('Envelope').textContent())!.includes(newest!.id));
    await dialog.locator('.dialog__footer').getByRole('button', { name: 'Close', exact: true }).click();
    await page.getByRole('combobox', { name: 'Filter by event type' }).selectOption('machine.stopped');
    await eventually(async () => {
      const types = await page.locator('tr[data-event-id] .table__primary').allTextContents();
      return types.length > 0 && types.every((type) => type === 'machine.stopped') ? true : undefined;
    }, 'only machine.stopped events');
    assert.deepEqual(problems, []);
  });

  test('long lists load older pages: the deliveries of an endpoint and the events', async () => {
    const endpoint = (await call('POST', '/api/event-webhooks', { url: `${receiver.origin}/long`, events: ['machine.stopped'], description: 'Long' })).json();
    receiver.answer = 200;
    const emitted = [];
    for (let i = 0; i < 55; i++) emitted.push(await emit('machine.stopped'));
    await settledStatus(endpoint.id, emitted.at(-1)!.id, 'delivered');

    await page.goto(`${live.baseUrl}/event-webhooks/${endpoint.id}`);
    const deliveryRows = page.locator('tr[data-delivery-id]');
    await eventually(async () => ((await deliveryRows.count()) === 50 ? true : undefined), 'the first 50 deliveries');
    await page.getByRole('button', { name: 'Load older deliveries' }).click();
    await eventually(async () => ((await deliveryRows.count()) === 55 ? true : undefined), 'all 55 deliveries');
    assert.equal(await page.getByRole('button', { name: 'Load older deliveries' }).count(), 0, 'no more to load');
    const shownIds = await deliveryRows.evaluateAll((rows) => rows.map((row) => (row as HTMLElement).dataset['deliveryId']));
    assert.equal(new Set(shownIds).size, 55, 'each delivery once');

    await page.goto(`${live.baseUrl}/events`);
    await page.getByRole('combobox', { name: 'Filter by event type' }).selectOption('machine.stopped');
    const eventRows = page.locator('tr[data-event-id]');
    await eventually(async () => ((await eventRows.count()) === 50 ? true : undefined), 'the first 50 events');
    await page.getByRole('button', { name: 'Load older events' }).click();
    await eventually(async () => ((await eventRows.count()) > 50 ? true : undefined), 'older events');
    const eventIds = await eventRows.evaluateAll((rows) => rows.map((row) => (row as HTMLElement).dataset['eventId']));
    assert.ok(emitted.every((event) => eventIds.includes(event.id)), 'every emitted event listed');
    assert.equal(new Set(eventIds).size, eventIds.length, 'each event once');
    assert.deepEqual(problems, []);
  });

  test('a list polled while a delivery is on its way keeps the older page loaded (a poll read the first page alone and undid "Load older")', async () => {
    // The newest delivery is held by its receiver: pending, so the page polls every 3 s.
    const holding = await startReceiver((request) => (request.body.includes('"machine.created"') ? 'hang' : { status: 200, body: 'ok' }));
    try {
      const endpoint = (await call('POST', '/api/event-webhooks', { url: `https://127.0.0.1:${holding.port}/held`, events: ['machine.stopped', 'machine.created'], description: 'Held' })).json();
      let last;
      for (let i = 0; i < 54; i++) last = await emit('machine.stopped');
      await settledStatus(endpoint.id, last!.id, 'delivered');
      const held = await emit('machine.created');
      await settledStatus(endpoint.id, held.id, 'pending');

      await page.goto(`${live.baseUrl}/event-webhooks/${endpoint.id}`);
      const rows = page.locator('tr[data-delivery-id]');
      await eventually(async () => ((await rows.count()) === 50 ? true : undefined), 'the first 50 deliveries');
      await page.getByRole('button', { name: 'Load older deliveries' }).click();
      await eventually(async () => ((await rows.count()) === 55 ? true : undefined), 'all 55 deliveries');
      // A poll reads again only once the last one has drawn: after the second, the first has drawn.
      const firstPageRead = (request: { url(): string }) => request.url().includes(`endpoint=${endpoint.id}`) && !request.url().includes('cursor=');
      await page.waitForRequest(firstPageRead, { timeout: 10_000 });
      await page.waitForRequest(firstPageRead, { timeout: 10_000 });
      assert.equal(await rows.count(), 55, 'the older page is still shown');
      const shownIds = await rows.evaluateAll((shown) => shown.map((row) => (row as HTMLElement).dataset['deliveryId']));
      assert.equal(new Set(shownIds).size, 55, 'each delivery once');
      assert.equal(await rows.first().getAttribute('data-status'), 'pending', 'the held delivery first, still pending');
      assert.equal(await page.getByRole('button', { name: 'Load older deliveries' }).count(), 0, 'no more to load');
      assert.deepEqual(problems, []);
    } finally {
      await holding.close();
    }
  });
});
