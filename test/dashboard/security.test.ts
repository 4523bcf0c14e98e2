import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import type { Browser, BrowserContext, CDPSession, Page } from 'playwright-core';
import { Secret, TOTP } from 'otpauth';
import { createTestApp, registerUser, type TestUser } from '../support/app.ts';
import { recordSecurityEvent } from '../../src/security-log/security-log.ts';
import { linkIn, readOutbox } from '../support/mail.ts';
import { eventually, freePort, launchBrowser, newContext, useSession, watchConsole, type LiveApp } from '../support/browser.ts';
import { contrastProblems, LAYOUT_WIDTHS, layoutProblems, settled, unnamedControls, walkTabStops } from './page-audits.ts';

const TEN_MINUTES_MS = 10 * 60_000;
/** The sign-in rate limit's window (10 attempts per address, each step of a second-factor sign-in counted). */
const RATE_WINDOW_MS = 15 * 60_000;

/**
 * The app on http://localhost:<port>, with PUBLIC_URL the same origin: a
 * passkey's RP ID is PUBLIC_URL's host, and WebAuthn takes no IP address as
 * an RP ID (startLiveApp's 127.0.0.1 would not do).
 */
async function startOnLocalhost(): Promise<LiveApp> {
  const port = await freePort();
  const baseUrl = `http://localhost:${port}`;
  // No SMTP_URL: mail is written as .eml files, and the reset link is taken from there.
  const ctx = await createTestApp({ env: { PUBLIC_URL: baseUrl, SMTP_URL: '' } });
  await ctx.app.listen({ port, host: '127.0.0.1' });
  return Object.assign(ctx, { baseUrl });
}

describe('dashboard in Chromium: authenticator app, recovery codes, passkeys, recent authentication and the security log', () => {
  let live: LiveApp;
  let browser: Browser;
  let user: TestUser;
  let context: BrowserContext;
  let page: Page;
  let cdp: CDPSession;
  let authenticatorId: string;
  const problems: string[] = [];
  let secret = '';
  let recoveryCodes: string[] = [];

  before(async () => {
    live = await startOnLocalhost();
    browser = await launchBrowser();
    user = await registerUser(live, { name: 'Katherine Johnson' });
    context = await newContext(browser);
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: live.baseUrl });
    await useSession(context, live, user.session);
    page = await context.newPage();
    problems.push(...watchConsole(page));
    // Chromium's virtual authenticator: a platform authenticator that holds discoverable credentials and verifies the user.
    cdp = await context.newCDPSession(page);
    await cdp.send('WebAuthn.enable', { enableUI: false });
    ({ authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
      options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true },
    }));
  });
  after(async () => {
    await browser?.close();
    await live?.close();
  });

  /** The code the authenticator app shows at the app's (manual) clock's time. */
  const totpCode = (at = live.clock.now()) =>
    new TOTP({ secret: Secret.fromBase32(secret), algorithm: 'SHA1', digits: 6, period: 30 }).generate({ timestamp: at });
  /** Every attempt, password or second step, counts in the sign-in rate limit: a test that signs in often starts a new window. */
  const newRateWindow = () => live.clock.advance(RATE_WINDOW_MS);
  /** A new 30-second step: a code is accepted once, so each sign-in needs the next one. */
  const nextStep = () => live.clock.advance(30_000);
  const openSecurity = async () => {
    await page.goto(`${live.baseUrl}/account/security`);
    await settled(page);
  };
  const signOut = async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(`${live.baseUrl}/sign-in`);
  };
  const enterPassword = async () => {
    await page.getByLabel('Email address').fill(user.email);
    await page.getByLabel('Password', { exact: true }).fill(user.password);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  };
  const secondStep = async () => {
    await page.getByRole('heading', { name: 'Two-step verification' }).waitFor();
    return page.getByRole('form', { name: 'Two-step verification' });
  };
  const landed = async () => {
    await page.waitForURL(`${live.baseUrl}/machines`);
    await page.locator('.usermenu__email', { hasText: user.email }).waitFor();
  };

  test('enrol the authenticator app: QR code and setup key, confirmed by a first code, then 10 recovery codes shown once', async () => {
    await page.goto(`${live.baseUrl}/account`);
    await page.getByRole('navigation', { name: 'Account' }).getByRole('link', { name: 'Security' }).click();
    await page.waitForURL(`${live.baseUrl}/account/security`);
    const totpCard = page.locator('#totp');
    await totpCard.getByText('Off', { exact: true }).waitFor();

    await totpCard.getByRole('button', { name: 'Set up authenticator app' }).click();
    const dialog = page.getByRole('dialog', { name: 'Set up authenticator app' });
    const key = dialog.getByRole('textbox', { name: 'Setup key' });
    await key.waitFor();
    secret = await key.inputValue();
    assert.match(secret, /^[A-Z2-7]{16,}=*$/, 'a base32 secret');
    const qr = dialog.getByRole('img', { name: /QR code/ });
    assert.match(String(await qr.getAttribute('src')), /^data:image\/svg\+xml/);
    assert.ok(await qr.evaluate((image: HTMLImageElement) => image.complete && image.naturalWidth > 0), 'the QR code is drawn');

    const code = dialog.getByLabel('Code from the app');
    await code.fill(totpCode(live.clock.now() - 5 * 30_000));
    await dialog.getByRole('button', { name: 'Turn on' }).click();
    await dialog.getByRole('alert').waitFor();
    await code.fill(totpCode());
    await dialog.getByRole('button', { name: 'Turn on' }).click();
    const codes = dialog.getByRole('list', { name: 'Recovery codes' }).locator('li');
    await dialog.getByText('they will not be shown again').waitFor();
    recoveryCodes = (await codes.allTextContents()).map((text) => text.trim());
    assert.equal(recoveryCodes.length, 10);
    assert.equal(new Set(recoveryCodes).size, 10);

    await dialog.getByRole('button', { name: 'Copy recovery codes' }).click();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), recoveryCodes.join('\n'));
    const [download] = await Promise.all([page.waitForEvent('download'), dialog.getByRole('link', { name: 'Download' }).click()]);
    assert.equal(download.suggestedFilename(), 'machine-platform-recovery-codes.txt');
    const saved = await new Response(await download.createReadStream() as unknown as ReadableStream).text();
    for (const recoveryCode of recoveryCodes) assert.ok(saved.includes(recoveryCode));

    await dialog.getByRole('button', { name: 'I have saved them' }).click();
    await dialog.waitFor({ state: 'detached' });
    await totpCard.getByText('On', { exact: true }).waitFor();
    await page.locator('#recovery-codes').getByText('10 of 10 left').waitFor();
    const html = await page.content();
    assert.ok(!html.includes(secret) && !recoveryCodes.some((recoveryCode) => html.includes(recoveryCode)), 'neither the secret nor the codes stay in the page');
  });

  test('sign out; signing in asks for the code: a stale one is refused, the current one signs in', async () => {
    await signOut();
    await enterPassword();
    const form = await secondStep();
    assert.equal(await page.getByLabel('Password', { exact: true }).count(), 0, 'the password step is gone');
    nextStep();
    await form.getByLabel('Authentication code').fill(totpCode(live.clock.now() - 4 * 30_000));
    await form.getByRole('button', { name: 'Verify' }).click();
    await form.getByRole('alert').waitFor();
    await form.getByLabel('Authentication code').fill(totpCode());
    await form.getByRole('button', { name: 'Verify' }).click();
    await landed();
  });

  test('a recovery code signs in once; the same code again is refused', async () => {
    const useRecoveryCode = async (recoveryCode: string) => {
      const form = page.getByRole('form', { name: 'Two-step verification' });
      await form.getByLabel('Recovery code').fill(recoveryCode);
      await form.getByRole('button', { name: 'Verify' }).click();
      return form;
    };
    await signOut();
    await enterPassword();
    await secondStep();
    await page.getByRole('button', { name: 'Use a recovery code instead' }).click();
    await useRecoveryCode(recoveryCodes[0]!);
    await landed();

    await signOut();
    await enterPassword();
    await secondStep();
    await page.getByRole('button', { name: 'Use a recovery code instead' }).click();
    const form = await useRecoveryCode(recoveryCodes[0]!);
    await form.getByRole('alert').waitFor();
    assert.match(page.url(), /\/sign-in/, 'a used code signs nobody in');
    await useRecoveryCode(recoveryCodes[1]!);
    await landed();
    await openSecurity();
    await page.locator('#recovery-codes').getByText('8 of 10 left').waitFor();
  });

  test('add a passkey with the virtual authenticator, rename it; it completes the second step, and signs in without a password', async () => {
    newRateWindow();
    await openSecurity();
    const passkeys = page.locator('#passkeys');
    await passkeys.getByText('No passkeys yet').waitFor();
    await passkeys.getByRole('button', { name: 'Add a passkey' }).click();
    const dialog = page.getByRole('dialog', { name: 'Add a passkey' });
    await dialog.getByRole('textbox', { name: 'Name' }).fill('Virtual key');
    await dialog.getByRole('button', { name: 'Continue' }).click();
    await dialog.waitFor({ state: 'detached' });
    const row = passkeys.locator('tr', { hasText: 'Virtual key' });
    await row.waitFor();
    assert.equal((await row.locator('td[data-label="Last used"]').innerText()).trim(), 'Never');
    const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
    assert.equal(credentials.length, 1);
    assert.equal(credentials[0]!.isResidentCredential, true, 'a discoverable credential: it can sign in without an address');
    assert.equal(credentials[0]!.rpId, 'localhost');

    await passkeys.getByRole('button', { name: 'Rename Virtual key' }).click();
    const rename = page.getByRole('dialog', { name: 'Rename passkey' });
    await rename.getByRole('textbox', { name: 'Name' }).fill('Chromium virtual key');
    await rename.getByRole('button', { name: 'Save' }).click();
    await passkeys.locator('tr', { hasText: 'Chromium virtual key' }).waitFor();

    // As the second step after the password.
    await signOut();
    await enterPassword();
    await secondStep();
    await page.getByRole('button', { name: 'Use a passkey' }).click();
    await landed();

    // Without a password.
    await signOut();
    await page.getByRole('button', { name: 'Use a passkey' }).click();
    await landed();
    await openSecurity();
    assert.notEqual((await passkeys.locator('tr', { hasText: 'Chromium virtual key' }).locator('td[data-label="Last used"]').innerText()).trim(), 'Never');
  });

  test('a password reset does not get past the second factor: the reset page asks for the code before it signs in', async () => {
    newRateWindow();
    await signOut();
    await page.getByRole('link', { name: 'Forgot password?' }).click();
    await page.getByLabel('Email address').fill(user.email);
    await page.getByRole('button', { name: 'Send reset link' }).click();
    await page.getByRole('heading', { name: 'Check your email' }).waitFor();
    const mail = await eventually(async () => (await readOutbox(live.config.mailDir)).find((message) => message.to.includes(user.email) && /reset/i.test(message.subject)), 'the reset mail');
    const link = new URL(linkIn(mail, '/reset-password').url);
    await page.goto(`${live.baseUrl}${link.pathname}${link.search}`);
    user.password = 'a new passphrase after the reset';
    await page.getByLabel('New password', { exact: true }).fill(user.password);
    await page.getByLabel('Repeat the new password').fill(user.password);
    await page.getByRole('button', { name: 'Set new password' }).click();
    const form = await secondStep();
    await page.getByText('Your password is changed.').waitFor();
    assert.equal((await context.cookies()).find((cookie) => cookie.name === 'session')?.value ?? '', '', 'no session before the second step');
    nextStep();
    await form.getByLabel('Authentication code').fill(totpCode());
    await form.getByRole('button', { name: 'Verify' }).click();
    await landed();
  });

  test('after 10 minutes, creating an API key asks for the password first, then goes through; cancelling leaves the refusal', async () => {
    live.clock.advance(TEN_MINUTES_MS + 60_000);
    await page.goto(`${live.baseUrl}/account/api-keys`);
    await page.getByRole('button', { name: 'Create API key' }).click();
    const create = page.getByRole('dialog', { name: 'Create API key' });
    await create.getByLabel('Name').fill('After a while');
    await create.getByRole('button', { name: 'Create key' }).click();
    const prompt = page.getByRole('dialog', { name: 'Confirm it is you' });
    await prompt.getByLabel('Password').waitFor();
    assert.ok(await page.evaluate(() => document.activeElement?.closest('dialog')?.getAttribute('aria-labelledby') !== null && document.activeElement instanceof HTMLInputElement && document.activeElement.type === 'password'), 'the password field has the focus');
    await prompt.getByRole('button', { name: 'Cancel' }).click();
    await prompt.waitFor({ state: 'detached' });
    await create.getByRole('alert').waitFor();

    await create.getByRole('button', { name: 'Create key' }).click();
    await prompt.getByLabel('Password').fill('not my password');
    await prompt.getByRole('button', { name: 'Confirm' }).click();
    await prompt.getByText(/wrong/i).waitFor();
    await prompt.getByLabel('Password').fill(user.password);
    await prompt.getByRole('button', { name: 'Confirm' }).click();
    await prompt.waitFor({ state: 'detached' });
    const key = await create.getByRole('textbox', { name: 'API key' }).inputValue();
    assert.match(key, /^tmk_/);
    await create.getByRole('button', { name: 'Done' }).click();
  });

  test('after 10 minutes, turning the app off asks again (a code from the app this time), then turns it off', async () => {
    live.clock.advance(TEN_MINUTES_MS + 60_000);
    await openSecurity();
    await page.locator('#totp').getByRole('button', { name: 'Turn off' }).click();
    const dialog = page.getByRole('dialog', { name: 'Turn off the authenticator app?' });
    await dialog.getByRole('button', { name: 'Use your password instead' }).click();
    await dialog.getByLabel('Password').fill(user.password);
    await dialog.getByRole('button', { name: 'Turn off' }).click();
    const prompt = page.getByRole('dialog', { name: 'Confirm it is you' });
    await prompt.getByRole('button', { name: 'Use a code from your authenticator app instead' }).click();
    nextStep();
    await prompt.getByLabel('Authentication code').fill(totpCode());
    await prompt.getByRole('button', { name: 'Confirm' }).click();
    await dialog.waitFor({ state: 'detached' });
    await page.locator('#totp').getByText('Off', { exact: true }).waitFor();
    await page.locator('#recovery-codes').getByText('You get 10 recovery codes').waitFor();
  });

  test('remove the passkey: after its confirmation it no longer signs in', async () => {
    await openSecurity();
    const passkeys = page.locator('#passkeys');
    await passkeys.getByRole('button', { name: 'Remove Chromium virtual key' }).click();
    const confirm = page.getByRole('dialog', { name: 'Remove passkey?' });
    assert.ok(await page.evaluate(() => document.activeElement?.textContent === 'Cancel'), 'a destructive dialog starts on Cancel');
    await confirm.getByRole('button', { name: 'Remove passkey' }).click();
    await confirm.waitFor({ state: 'detached' });
    await passkeys.getByText('No passkeys yet').waitFor();

    await signOut();
    await page.getByRole('button', { name: 'Use a passkey' }).click();
    await page.getByRole('alert').waitFor();
    assert.match(page.url(), /\/sign-in$/, 'the authenticator still holds it, the service no longer takes it');
    await enterPassword();
    await landed();
  });

  test('the security log lists what happened, in words, with time, IP address and device, and no secret', async () => {
    await openSecurity();
    const log = page.locator('#security-log');
    await log.locator('tbody tr').first().waitFor();
    // Everything this file did fills more than the first page.
    for (let page = 0; page < 5 && await log.getByRole('button', { name: 'Load older entries' }).count() > 0; page++) {
      const shown = await log.locator('tbody tr').count();
      await log.getByRole('button', { name: 'Load older entries' }).click();
      await log.locator('tbody tr').nth(shown).waitFor();
    }
    const types = await log.locator('tbody tr').evaluateAll((rows) => rows.map((row) => (row as HTMLElement).dataset.type));
    for (const type of ['sign_in', 'sign_in_failed', 'sign_out', 'password_reset', 'totp_enabled', 'totp_disabled', 'recovery_code_used', 'passkey_added', 'passkey_removed', 'api_key_created']) {
      assert.ok(types.includes(type), `the log shows ${type} (it shows ${types.join(', ')})`);
    }
    const signIn = log.locator('tr[data-type="sign_in"]').first();
    assert.match(await signIn.innerText(), /Signed in/);
    assert.match(await signIn.locator('td[data-label="IP address"]').innerText(), /127\.0\.0\.1/);
    assert.match(await signIn.locator('td[data-label="Device"]').innerText(), /Chrome on Linux/);
    assert.ok(await signIn.locator('td[data-label="Time"] time').getAttribute('datetime'));
    await log.locator('tr[data-type="totp_enabled"]', { hasText: 'Authenticator app turned on' }).waitFor();
    const html = await page.content();
    assert.ok(!html.includes(secret), 'no TOTP secret in the log');
    for (const recoveryCode of recoveryCodes) assert.ok(!html.includes(recoveryCode), 'no recovery code in the log');
    assert.ok(!html.includes(user.password), 'no password in the log');

  });

  test('the log is read a page at a time, newest first: "Load older entries" appends the next page', async () => {
    // Thirty more entries, a minute apart, written as the service writes them: more than a page.
    for (let i = 0; i < 30; i++) {
      live.clock.advance(60_000);
      await recordSecurityEvent(live.app.deps.db, { accountId: user.id, type: 'session_revoked', at: live.clock.now(), origin: { ip: '203.0.113.7', userAgent: 'Mozilla/5.0 (Windows NT 10.0) Firefox/128.0' } });
    }
    await openSecurity();
    const log = page.locator('#security-log');
    const rows = log.locator('tbody tr');
    const firstPage = await rows.count();
    assert.equal(firstPage, 25);
    await log.getByRole('button', { name: 'Load older entries' }).click();
    await page.waitForFunction((count) => document.querySelectorAll('#security-log tbody tr').length > count, firstPage);
    const times = await log.locator('td[data-label="Time"] time').evaluateAll((nodes) => nodes.map((node) => Date.parse(node.getAttribute('datetime') ?? '')));
    assert.deepEqual(times, [...times].sort((a, b) => b - a), 'newest first, across pages');
    assert.ok(await page.evaluate(() => document.activeElement?.closest('#security-log tbody tr') !== null), 'the focus moves to the first row of the new page');
    const types = await rows.evaluateAll((nodes) => nodes.map((node) => (node as HTMLElement).dataset.type));
    assert.deepEqual(types.slice(0, 30), Array(30).fill('session_revoked'), 'the thirty newest, across the two pages');
    assert.ok(types.length > 30 && types.slice(30).every((type) => type !== 'session_revoked'), 'then the older entries, not one shown twice');
    const old = log.locator('tr[data-type="session_revoked"]').last();
    assert.match(await old.innerText(), /Session signed out/);
    assert.match(await old.innerText(), /Firefox on Windows/);
    assert.match(await old.innerText(), /203\.0\.113\.7/);
  });

  test('passkeys work in a browser without the WebAuthn JSON helpers (the page converts the binary fields itself)', async () => {
    const other = await registerUser(live, { name: 'Dorothy Vaughan' });
    const oldContext = await newContext(browser);
    try {
      await useSession(oldContext, live, other.session);
      // What a browser before PublicKeyCredential.parseCreationOptionsFromJSON and toJSON() offers.
      await oldContext.addInitScript(() => {
        const credential = PublicKeyCredential as unknown as Record<string, unknown>;
        delete credential.parseCreationOptionsFromJSON;
        delete credential.parseRequestOptionsFromJSON;
        delete (PublicKeyCredential.prototype as unknown as Record<string, unknown>).toJSON;
      });
      const oldPage = await oldContext.newPage();
      problems.push(...watchConsole(oldPage));
      const oldCdp = await oldContext.newCDPSession(oldPage);
      await oldCdp.send('WebAuthn.enable', { enableUI: false });
      await oldCdp.send('WebAuthn.addVirtualAuthenticator', {
        options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true },
      });
      await oldPage.goto(`${live.baseUrl}/account/security`);
      assert.equal(await oldPage.evaluate(() => typeof (PublicKeyCredential as unknown as Record<string, unknown>).parseCreationOptionsFromJSON), 'undefined');
      await oldPage.locator('#passkeys').getByRole('button', { name: 'Add a passkey' }).click();
      const dialog = oldPage.getByRole('dialog', { name: 'Add a passkey' });
      await dialog.getByRole('textbox', { name: 'Name' }).fill('Older browser');
      await dialog.getByRole('button', { name: 'Continue' }).click();
      await oldPage.locator('#passkeys tr', { hasText: 'Older browser' }).waitFor();
      await oldPage.getByRole('button', { name: 'Sign out' }).click();
      await oldPage.waitForURL(`${live.baseUrl}/sign-in`);
      await oldPage.getByRole('button', { name: 'Use a passkey' }).click();
      await oldPage.waitForURL(`${live.baseUrl}/machines`);
      await oldPage.locator('.usermenu__email', { hasText: other.email }).waitFor();
    } finally {
      await oldContext.close();
    }
  });

  test('the Security page fits 375 to 1280 px, names every control, shows focus and keeps contrast, with and without a dialog', async () => {
    const found: string[] = [];
    for (const width of LAYOUT_WIDTHS) {
      await page.setViewportSize({ width, height: 800 });
      await openSecurity();
      found.push(...(await layoutProblems(page)).map((problem) => `${width} px: ${problem}`));
    }
    await page.setViewportSize({ width: 1280, height: 800 });
    await openSecurity();
    found.push(...await unnamedControls(page), ...await contrastProblems(page));
    found.push(...(await walkTabStops(page)).filter((stop) => stop.problem !== '').map((stop) => `${stop.label}: ${stop.problem}`));
    for (const width of [375, 1280]) {
      await page.setViewportSize({ width, height: 800 });
      await openSecurity();
      await page.locator('#totp').getByRole('button', { name: 'Set up authenticator app' }).click();
      const dialog = page.getByRole('dialog', { name: 'Set up authenticator app' });
      await dialog.getByRole('textbox', { name: 'Setup key' }).waitFor();
      found.push(...(await layoutProblems(page)).map((problem) => `${width} px, enrolment dialog: ${problem}`));
      found.push(...(await unnamedControls(page)).map((problem) => `enrolment dialog: ${problem}`));
      found.push(...(await contrastProblems(page)).map((problem) => `enrolment dialog: ${problem}`));
      await page.keyboard.press('Escape');
      await dialog.waitFor({ state: 'detached' });
    }
    assert.deepEqual(found, []);
  });

  test('no page error or CSP violation on the way', () => {
    assert.deepEqual(problems, []);
  });
});
