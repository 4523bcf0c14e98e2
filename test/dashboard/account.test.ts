import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { asSession, sessionCookieOf, type TestUser } from '../support/app.ts';
import { openSignedInPage, type LiveApp, type SignedInPage } from '../support/browser.ts';

describe('dashboard in Chromium: account, API keys, password and sessions', () => {
  let live: LiveApp;
  let user: TestUser;
  let page: Page;
  let problems: string[];
  let ui: SignedInPage;

  before(async () => {
    ui = await openSignedInPage({ user: { name: 'Grace Hopper' }, clipboard: true });
    ({ live, user, page, problems } = ui);
  });
  after(() => ui?.close());

  const bearer = (key: string) => fetch(`${live.baseUrl}/api/me`, { headers: { authorization: `Bearer ${key}` } });
  const signInThroughApi = async (password = user.password) => {
    const response = await live.app.inject({ method: 'POST', url: '/api/auth/login', headers: { origin: live.baseUrl, 'user-agent': 'Mozilla/5.0 (Windows NT 10.0) Firefox/128.0' }, payload: { email: user.email, password } });
    assert.equal(response.statusCode, 200, response.body);
    return sessionCookieOf(response);
  };
  const sessionWorks = async (token: string) => (await live.app.inject({ method: 'GET', url: '/api/me', headers: asSession(token, live.baseUrl) })).statusCode === 200;

  test('create an API key: shown once with a copy button, works as a Bearer token, then revoked', async () => {
    await page.goto(`${live.baseUrl}/account/api-keys`);
    await page.getByText('No API keys yet').waitFor();
    await page.getByRole('button', { name: 'Create API key' }).click();
    const dialog = page.getByRole('dialog', { name: 'Create API key' });
    await dialog.getByLabel('Name').fill('CI deploys');
    await dialog.getByRole('button', { name: 'Create key' }).click();
    const shown = dialog.getByRole('textbox', { name: 'API key' });
    const key = await shown.inputValue();
    assert.match(key, /^tmk_[0-9A-Za-z]{38}$/);
    await dialog.getByText('it will not be shown again').waitFor();

    await dialog.getByRole('button', { name: 'Copy API key' }).click();
    await dialog.getByRole('button', { name: 'Copy API key' }).filter({ hasText: 'Copied' }).waitFor();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), key);

    const me = await bearer(key);
    assert.equal(me.status, 200);
    assert.equal((await me.json()).account.id, user.id);

    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
    const row = page.locator('tr', { hasText: 'CI deploys' });
    await row.getByText(`${key.slice(0, 8)}…`).waitFor();
    assert.ok(!(await page.content()).includes(key), 'the key left the DOM with its dialog');
    assert.ok(await page.evaluate(() => document.activeElement?.textContent === 'Create API key'), 'focus returned to the button that opened the dialog');

    await page.reload();
    const lastUsed = page.locator('tr', { hasText: 'CI deploys' }).locator('td[data-label="Last used"]');
    await lastUsed.waitFor();
    assert.equal(await lastUsed.locator('time').getAttribute('datetime'), new Date(live.clock.now()).toISOString(), 'the Bearer request shows as the last use');
    assert.ok(!(await page.content()).includes(key), 'not shown again after a reload');
    await page.getByRole('link', { name: 'Profile' }).click();
    await page.getByRole('heading', { name: 'Profile' }).waitFor();
    assert.ok(!(await page.content()).includes(key), 'nor on another page');
    await page.goBack();

    await page.getByRole('button', { name: 'Revoke CI deploys' }).click();
    const confirm = page.getByRole('dialog', { name: 'Revoke API key?' });
    await confirm.getByText('stops working at once').waitFor();
    for (let i = 0; i < 5; i++) {
      await page.keyboard.press(i % 2 === 0 ? 'Tab' : 'Shift+Tab');
      await page.keyboard.press('Tab');
      assert.ok(await page.evaluate(() => document.activeElement?.closest('dialog') !== null), 'Tab stays inside the dialog');
    }
    await confirm.getByRole('button', { name: 'Cancel' }).click();
    assert.equal((await bearer(key)).status, 200, 'cancel keeps the key');
    await page.getByRole('button', { name: 'Revoke CI deploys' }).click();
    await confirm.getByRole('button', { name: 'Revoke key' }).click();
    await page.getByText('No API keys yet').waitFor();
    assert.equal((await bearer(key)).status, 401);
  });

  test('change the password: the wrong current one is refused with its detail, other sessions end', async () => {
    const otherSession = await signInThroughApi();
    await page.goto(`${live.baseUrl}/account`);
    const form = page.getByRole('form', { name: 'Change password' });
    await form.getByLabel('Current password').fill('not the password');
    await form.getByLabel('New password', { exact: true }).fill('my new long password');
    await form.getByLabel('Repeat the new password').fill('my new long password');
    await form.getByRole('button', { name: 'Change password' }).click();
    await form.getByRole('alert').getByText('The current password is wrong.').waitFor();
    assert.equal(await sessionWorks(otherSession), true);

    await form.getByLabel('Current password').fill(user.password);
    await form.getByRole('button', { name: 'Change password' }).click();
    await page.getByText('Password changed. Every other session was signed out').waitFor();
    assert.equal(await sessionWorks(otherSession), false);
    assert.equal(await sessionWorks(user.session), true, 'this browser stays signed in');
    user.password = 'my new long password';
    await signInThroughApi();
  });

  test('the sessions list shows this browser and others; signing one out ends it', async () => {
    const other = await signInThroughApi();
    await page.goto(`${live.baseUrl}/account/sessions`);
    const rows = page.locator('tbody tr');
    await rows.first().waitFor();
    const count = await rows.count();
    assert.ok(count >= 2, `expected at least 2 sessions, saw ${count}`);
    const current = page.locator('tr', { hasText: 'This session' });
    assert.equal(await current.count(), 1);
    assert.doesNotMatch(await current.innerText(), /Firefox/);

    const otherId = (await live.app.deps.db.selectFrom('sessions').select('id').orderBy('created_at', 'desc').orderBy('id', 'desc').where('account_id', '=', user.id).executeTakeFirstOrThrow()).id;
    const otherRow = page.locator(`tr[data-session-id="${otherId}"]`);
    assert.match(await otherRow.innerText(), /Firefox on Windows/);
    await otherRow.getByRole('button', { name: /^Sign out/ }).click();
    await otherRow.waitFor({ state: 'detached' });
    assert.equal(await sessionWorks(other), false);
    assert.equal(await sessionWorks(user.session), true);
  });

  test('no page error or CSP violation on the way', () => {
    assert.deepEqual(problems, []);
  });
});
