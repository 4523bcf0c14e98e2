import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { asSession, type TestUser } from '../support/app.ts';
import { openSignedInPage, type LiveApp, type SignedInPage } from '../support/browser.ts';

const SETTLE_MS = 10_000;

/** The Previews section of a machine's page: a port made public and private again, a signed link to one. */
describe('dashboard in Chromium: a machine’s previews', () => {
  let live: LiveApp;
  let user: TestUser;
  let page: Page;
  let problems: string[];
  let ui: SignedInPage;
  let machineId = '';

  before(async () => {
    ui = await openSignedInPage({ app: { realClock: true, env: { MACHINE_BOOT_MS: '300', MACHINE_WORKER_INTERVAL_MS: '100' } } });
    ({ live, user, page, problems } = ui);
    const created = await live.app.inject({ method: 'POST', url: '/api/machines', headers: asSession(user.session, live.baseUrl), payload: { name: 'web-box' } });
    assert.equal(created.statusCode, 201, created.body);
    machineId = created.json().id;
  });
  after(() => ui?.close());

  test('a port made public is listed with its URL until made private; a signed link opens its preview host', async () => {
    await page.goto(`${live.baseUrl}/machines/${machineId}`);
    const section = page.locator('#machine-previews');
    await section.getByText('No public ports.').waitFor({ timeout: SETTLE_MS });
    const form = section.getByRole('form', { name: 'Open a port' });
    await form.getByRole('spinbutton', { name: 'Port' }).fill('8080');
    await form.getByRole('button', { name: 'Make public' }).click();
    const host = `8080-${machineId.replace('_', '-')}.localhost`;
    const row = section.getByRole('table', { name: 'Public ports' }).getByRole('row').filter({ hasText: host });
    await row.waitFor({ timeout: SETTLE_MS });
    const settings = (await live.app.inject({ method: 'GET', url: `/api/machines/${machineId}/previews`, headers: asSession(user.session, live.baseUrl) })).json();
    assert.deepEqual(settings.publicPorts.map((entry: { port: number }) => entry.port), [8080]);

    await form.getByRole('button', { name: 'Make a link (1 hour)' }).click();
    const link = section.getByRole('link', { name: 'Open port 8080' });
    await link.waitFor({ timeout: SETTLE_MS });
    const href = new URL(String(await link.getAttribute('href')));
    assert.equal(href.hostname, host);
    assert.match(href.search, /^\?preview-link=\d+\.[A-Za-z0-9_-]{43}$/);

    await row.getByRole('button', { name: 'Make private' }).click();
    await section.getByText('No public ports.').waitFor({ timeout: SETTLE_MS });
    assert.deepEqual(problems, []);
  });
});
