import { strict as assert } from 'node:assert';
import { createHmac } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { asSession, type TestUser } from '../support/app.ts';
import { eventually, openSignedInPage, type LiveApp, type SignedInPage } from '../support/browser.ts';
import { startHttpsReceiver, type HttpsReceiver } from '../support/https-receiver.ts';

/** Stripe-style check of Service-Signature (CONTRACT 11): v1 = HMAC-SHA256(secret, `${t}.${body}`). */
function signedWith(secret: string, header: string, body: string): boolean {
  const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header);
  return match !== null && createHmac('sha256', secret).update(`${match[1]}.${body}`).digest('hex') === match[2];
}

describe('dashboard in Chromium: event webhooks', () => {
  let live: LiveApp;
  let receiver: HttpsReceiver;
  let user: TestUser;
  let page: Page;
  let problems: string[];
  let ui: SignedInPage;

  before(async () => {
    // One attempt: a failed test delivery is final at once, so the page offers Retry.
    ui = await openSignedInPage({ app: { realClock: true, env: { WEBHOOK_MAX_ATTEMPTS: '1' } }, clipboard: true });
    ({ live, user, page, problems } = ui);
    receiver = await startHttpsReceiver();
  });
  after(async () => {
    await receiver?.close();
    await ui?.close();
  });

  const endpointsApi = async () => (await live.app.inject({ method: 'GET', url: '/api/event-webhooks', headers: asSession(user.session, live.baseUrl) })).json().data;
  const storedSecret = async (id: string) => (await live.app.deps.db.selectFrom('event_endpoints').select('secret').where('id', '=', id).executeTakeFirstOrThrow()).secret;

  test('add an endpoint: events from the catalog, the secret shown once with a copy button', async () => {
    await page.goto(`${live.baseUrl}/event-webhooks`);
    await page.getByText('No endpoints yet').waitFor();
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    const dialog = page.getByRole('dialog', { name: 'Add endpoint' });
    await dialog.getByRole('textbox', { name: 'Endpoint URL' }).fill(`${receiver.origin}/hooks`);
    await dialog.getByLabel('Description').fill('Orders service');
    await dialog.getByText('Selected events').click();
    await dialog.getByRole('checkbox', { name: /machine\.created/ }).check();
    await dialog.getByRole('checkbox', { name: /machine\.stopped/ }).check();
    await dialog.getByRole('button', { name: 'Add endpoint' }).click();

    const secret = await dialog.getByRole('textbox', { name: 'Signing secret' }).inputValue();
    assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    await dialog.getByRole('button', { name: 'Copy signing secret' }).click();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), secret);
    const [endpoint] = await endpointsApi();
    assert.deepEqual([endpoint.url, endpoint.events, endpoint.description, endpoint.enabled], [`${receiver.origin}/hooks`, ['machine.created', 'machine.stopped'], 'Orders service', true]);
    assert.equal(await storedSecret(endpoint.id), secret);

    await dialog.getByRole('link', { name: 'View endpoint' }).click();
    await page.waitForURL(`${live.baseUrl}/event-webhooks/${endpoint.id}`);
    await page.getByRole('heading', { name: 'Orders service' }).waitFor();
    assert.ok(!(await page.content()).includes(secret), 'the secret is not on the endpoint page');
  });

  test('an address the API refuses is marked at the URL field, which takes the focus, with a capitalised message', async () => {
    await page.getByRole('link', { name: 'Event webhooks', exact: true }).first().click();
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    const dialog = page.getByRole('dialog', { name: 'Add endpoint' });
    const url = dialog.getByRole('textbox', { name: 'Endpoint URL' });
    await url.fill('https://user:secret@example.com/hooks');
    await dialog.getByRole('button', { name: 'Add endpoint' }).click();
    await dialog.locator('input[name="url"][aria-invalid="true"]').waitFor();
    const message = await url.evaluate((input) => (input.getAttribute('aria-describedby') ?? '').split(' ').map((id) => document.getElementById(id)?.textContent ?? '').find((text) => text.startsWith('URL')));
    assert.equal(message, 'URL must not contain credentials.');
    assert.equal(await url.evaluate((input) => input === document.activeElement), true, 'focus moved to the field');
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
    assert.equal((await endpointsApi()).length, 1, 'nothing was added');
    const [endpoint] = await endpointsApi();
    await page.goto(`${live.baseUrl}/event-webhooks/${endpoint.id}`);
    await page.getByRole('heading', { name: 'Orders service' }).waitFor();
  });

  test('send a test event: delivered, signed, and listed in the deliveries with its response', async () => {
    const [endpoint] = await endpointsApi();
    const secret = await storedSecret(endpoint.id);
    await page.getByRole('button', { name: 'Send test event' }).click();
    await page.locator('#test-result', { hasText: 'Test event delivered.' }).waitFor();
    const delivery = receiver.received.at(-1)!;
    assert.equal(delivery.headers['service-event'], 'webhook.test');
    assert.ok(signedWith(secret, String(delivery.headers['service-signature']), delivery.body));
    const row = page.locator(`tr[data-delivery-id="${delivery.headers['service-delivery']}"]`);
    await row.waitFor();
    assert.match(await row.innerText(), /webhook\.test[\s\S]*Delivered[\s\S]*1[\s\S]*HTTP 200/);
  });

  test('pause and resume, edit the URL, events and description', async () => {
    await page.getByRole('button', { name: 'Pause' }).click();
    await page.getByRole('button', { name: 'Resume' }).waitFor();
    assert.equal((await endpointsApi())[0].enabled, false);
    await page.getByText('This endpoint is paused').waitFor();
    await page.getByRole('button', { name: 'Resume' }).click();
    await page.getByRole('button', { name: 'Pause' }).waitFor();
    assert.equal((await endpointsApi())[0].enabled, true);

    await page.getByRole('button', { name: 'Edit' }).click();
    const dialog = page.getByRole('dialog', { name: 'Edit endpoint' });
    await dialog.getByRole('textbox', { name: 'Endpoint URL' }).fill(`${receiver.origin}/hooks/v2`);
    await dialog.getByLabel('Description').fill('Orders service (EU)');
    await dialog.getByText('All events', { exact: true }).click();
    await dialog.getByRole('button', { name: 'Save changes' }).click();
    await dialog.waitFor({ state: 'detached' });
    await page.getByRole('heading', { name: 'Orders service (EU)' }).waitFor();
    const [endpoint] = await endpointsApi();
    assert.deepEqual([endpoint.url, endpoint.events, endpoint.description], [`${receiver.origin}/hooks/v2`, ['*'], 'Orders service (EU)']);
    await page.getByText(`${receiver.origin}/hooks/v2`).first().waitFor();
  });

  test('rotate the secret: the new one shown once, and it signs the next delivery', async () => {
    const [endpoint] = await endpointsApi();
    const before = await storedSecret(endpoint.id);
    await page.getByRole('button', { name: 'Rotate secret' }).click();
    await page.getByRole('dialog', { name: 'Rotate signing secret?' }).getByRole('button', { name: 'Rotate secret' }).click();
    const dialog = page.getByRole('dialog', { name: 'New signing secret' });
    const secret = await dialog.getByRole('textbox', { name: 'Signing secret' }).inputValue();
    assert.notEqual(secret, before);
    assert.equal(await storedSecret(endpoint.id), secret);
    await dialog.getByRole('button', { name: 'Done' }).click();
    assert.ok(!(await page.content()).includes(secret));

    await page.getByRole('button', { name: 'Send test event' }).click();
    await page.locator('#test-result', { hasText: 'Test event delivered.' }).waitFor();
    const delivery = receiver.received.at(-1)!;
    assert.equal(delivery.path, '/hooks/v2');
    assert.ok(signedWith(secret, String(delivery.headers['service-signature']), delivery.body));
  });

  test('a failed delivery shows its last response and can be retried', async () => {
    receiver.answer = 500;
    await page.getByRole('button', { name: 'Send test event' }).click();
    await page.locator('#test-result', { hasText: 'Test event failed.' }).waitFor();
    assert.match(await page.locator('#test-result').innerText(), /HTTP 500/);
    const failed = page.locator('tr[data-status="failed"]');
    await failed.waitFor();
    assert.match(await failed.innerText(), /Failed[\s\S]*HTTP 500/);
    await failed.getByRole('button', { name: /^Details/ }).click();
    await page.getByRole('dialog', { name: 'Delivery' }).getByLabel('Response body').filter({ hasText: '{"received":false}' }).waitFor();
    await page.keyboard.press('Escape');

    receiver.answer = 200;
    const id = await failed.getAttribute('data-delivery-id');
    await failed.getByRole('button', { name: /^Retry/ }).click();
    await page.locator(`tr[data-delivery-id="${id}"][data-status="delivered"]`).waitFor({ timeout: 10_000 });
    await eventually(() => (receiver.received.at(-1)?.headers['service-delivery'] === id ? true : undefined), 'the retried delivery');
  });

  test('delete the endpoint after confirming', async () => {
    await page.getByRole('button', { name: 'Delete endpoint' }).click();
    const confirm = page.getByRole('dialog', { name: 'Delete endpoint?' });
    await confirm.getByRole('button', { name: 'Cancel' }).click();
    assert.equal((await endpointsApi()).length, 1);
    await page.getByRole('button', { name: 'Delete endpoint' }).click();
    await confirm.getByRole('button', { name: 'Delete endpoint' }).click();
    await page.waitForURL(`${live.baseUrl}/event-webhooks`);
    await page.getByText('No endpoints yet').waitFor();
    assert.equal((await endpointsApi()).length, 0);
  });

  test('no page error or CSP violation on the way', () => {
    assert.deepEqual(problems, []);
  });
});
