import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { asSession } from '../support/app.ts';
import { eventually, launchBrowser, newContext, startLiveApp, watchConsole, type LiveApp } from '../support/browser.ts';
import { linkIn, readOutbox, type ReceivedMail } from '../support/mail.ts';

describe('dashboard in Chromium: sign-up, confirmation, sign-in, password reset', () => {
  let live: LiveApp;
  let browser: Browser;
  const email = 'ada@example.com';
  const password = 'correct horse battery';
  const newPassword = 'a completely new passphrase';
  const problems: string[] = [];

  before(async () => {
    browser = await launchBrowser();
    // No SMTP_URL: mail is written as .eml files, and the links are taken from those files.
    live = await startLiveApp({ env: { SMTP_URL: '' } });
  });
  after(async () => {
    await browser?.close();
    await live?.close();
  });

  const mailTo = (address: string, subject: string, count = 1) =>
    eventually(async () => {
      const mails = (await readOutbox(live.config.mailDir)).filter((mail) => mail.to.includes(address) && mail.subject === subject);
      return mails.length >= count ? mails[count - 1] : undefined;
    }, `mail "${subject}" in the outbox`);
  const pathOf = (mail: ReceivedMail, path: '/verify-email' | '/reset-password') => {
    const url = new URL(linkIn(mail, path).url);
    assert.equal(url.origin, live.baseUrl, 'the emailed link points at the dashboard');
    return url.pathname + url.search;
  };
  const banner = (page: Page) => page.locator('#confirmation-banner');
  /** The POSTs a page sent to the API, as "POST /api/…": opening an emailed link must send none. */
  const recordPosts = (page: Page) => {
    const posts: string[] = [];
    page.on('request', (request) => {
      const url = new URL(request.url());
      if (request.method() === 'POST' && url.pathname.startsWith('/api/')) posts.push(`POST ${url.pathname}`);
    });
    return posts;
  };
  const isVerified = async () => (await live.app.deps.db.selectFrom('accounts').select('email_verified_at').where('email', '=', email).executeTakeFirstOrThrow()).email_verified_at !== null;

  test('sign up, then confirm the address from the emailed link: the banner goes away', async () => {
    const context = await newContext(browser);
    const page = await context.newPage();
    problems.push(...watchConsole(page));
    await page.goto(`${live.baseUrl}/sign-up`);
    await page.getByLabel('Your name').fill('Ada Lovelace');
    await page.getByLabel('Email address').fill(` ${email.toUpperCase()} `);
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.waitForURL(`${live.baseUrl}/machines`);
    await page.locator('.flash', { hasText: `we sent a confirmation link to ${email}` }).waitFor();
    await banner(page).getByText('Confirm your email address.').waitFor();
    assert.equal(await page.locator('.usermenu__email').textContent(), email);

    const mail = await mailTo(email, 'Confirm your email address');
    const posts = recordPosts(page);
    await page.goto(`${live.baseUrl}${pathOf(mail, '/verify-email')}`);
    await page.getByRole('heading', { name: 'Confirm your email address' }).waitFor();
    await page.waitForLoadState('networkidle');
    assert.deepEqual(posts, [], 'opening the link sends nothing');
    assert.equal(await isVerified(), false, 'opening the link alone confirms nothing');
    await page.getByRole('button', { name: 'Confirm email address' }).click();
    await page.getByRole('heading', { name: 'Email address confirmed' }).waitFor();
    assert.deepEqual(posts, ['POST /api/auth/verify'], 'the button sends the token, once');
    assert.equal(await isVerified(), true);
    assert.equal(page.url(), `${live.baseUrl}/verify-email`, 'the used token is taken out of the address bar and its history entry');
    await page.getByRole('link', { name: 'Continue to the dashboard' }).click();
    await page.waitForURL(`${live.baseUrl}/machines`);
    await page.getByRole('link', { name: 'Account' }).click();
    await page.getByText('Confirmed', { exact: true }).waitFor();
    assert.equal(await banner(page).count(), 0, 'no banner once the address is confirmed');

    await page.goto(`${live.baseUrl}${pathOf(mail, '/verify-email')}`);
    await page.getByRole('button', { name: 'Confirm email address' }).click();
    await page.getByRole('heading', { name: 'This link no longer works' }).waitFor();
    await page.getByText('This link is invalid, has already been used or has expired.').waitFor();
    await context.close();
  });

  test('sign out, a wrong password shows the problem detail, then sign in', async () => {
    const context = await newContext(browser);
    const page = await context.newPage();
    problems.push(...watchConsole(page));
    await page.goto(`${live.baseUrl}/account`);
    await page.waitForURL(/\/sign-in\?next=%2Faccount$/);

    await page.getByLabel('Email address').fill(email);
    await page.getByLabel('Password', { exact: true }).fill('not my password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    const detail = (await live.app.inject({ method: 'POST', url: '/api/auth/login', headers: { origin: live.baseUrl }, payload: { email, password: 'wrong again' } })).json().detail;
    assert.equal(detail, 'The email address or password is wrong.');
    assert.equal((await page.getByRole('alert').textContent())?.trim(), detail);

    await page.getByLabel('Password', { exact: true }).fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${live.baseUrl}/account`, { waitUntil: 'commit' });
    await page.getByRole('heading', { name: 'Profile' }).waitFor();
    assert.equal(await page.getByRole('alert').count(), 0);

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(`${live.baseUrl}/sign-in`);
    await page.getByText('You are signed out.').waitFor();
    await page.goto(`${live.baseUrl}/account`);
    await page.waitForURL(/\/sign-in/);
    const cookies = await context.cookies();
    assert.equal(cookies.find((cookie) => cookie.name === 'session')?.value ?? '', '', 'the cookie is cleared');
    await context.close();
  });

  test('sign in with the keyboard alone, with a visible focus ring', async () => {
    const context = await newContext(browser);
    const page = await context.newPage();
    problems.push(...watchConsole(page));
    await page.goto(`${live.baseUrl}/sign-in`);
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    const focused = () => page.evaluate(() => {
      const element = document.activeElement as HTMLElement | null;
      const style = element ? getComputedStyle(element) : null;
      return { name: element?.getAttribute('name') ?? element?.textContent ?? '', outline: style ? style.outlineStyle : 'none' };
    });
    const tabTo = async (name: string) => {
      for (let i = 0; i < 8; i++) {
        await page.keyboard.press('Tab');
        const now = await focused();
        if (now.name === name) return now;
      }
      throw new Error(`Tab never reached ${name}`);
    };
    const emailFocus = await tabTo('email');
    assert.notEqual(emailFocus.outline, 'none', 'the focused field shows a ring');
    await page.keyboard.type(email);
    await tabTo('password');
    await page.keyboard.type(password);
    await page.keyboard.press('Enter');
    await page.waitForURL(`${live.baseUrl}/machines`);
    await page.locator('.usermenu__email', { hasText: email }).waitFor();
    await context.close();
  });

  test('forgot password and reset from the emailed link: other sessions are signed out', async () => {
    const other = await newContext(browser);
    const otherPage = await other.newPage();
    problems.push(...watchConsole(otherPage));
    await otherPage.goto(`${live.baseUrl}/sign-in`);
    await otherPage.getByLabel('Email address').fill(email);
    await otherPage.getByLabel('Password', { exact: true }).fill(password);
    await otherPage.getByRole('button', { name: 'Sign in' }).click();
    await otherPage.waitForURL(`${live.baseUrl}/machines`);

    const context = await newContext(browser);
    const page = await context.newPage();
    problems.push(...watchConsole(page));
    await page.goto(`${live.baseUrl}/sign-in`);
    await page.getByRole('link', { name: 'Forgot password?' }).click();
    await page.getByRole('heading', { name: 'Reset your password' }).waitFor();
    await page.getByLabel('Email address').fill(email);
    await page.getByRole('button', { name: 'Send reset link' }).click();
    await page.getByRole('heading', { name: 'Check your email' }).waitFor();

    const mail = await mailTo(email, 'Reset your password');
    const posts = recordPosts(page);
    await page.goto(`${live.baseUrl}${pathOf(mail, '/reset-password')}`);
    await page.getByLabel('New password', { exact: true }).waitFor();
    await page.waitForLoadState('networkidle');
    assert.deepEqual(posts, [], 'opening the link sends nothing');
    await page.getByLabel('New password', { exact: true }).fill(newPassword);
    await page.getByLabel('Repeat the new password').fill(`${newPassword}!`);
    await page.getByRole('button', { name: 'Set new password' }).click();
    assert.equal(page.url().includes('/reset-password'), true, 'mismatched passwords are not sent');
    await page.getByLabel('Repeat the new password').fill(newPassword);
    await page.getByRole('button', { name: 'Set new password' }).click();
    await page.waitForURL(`${live.baseUrl}/machines`);
    await page.getByText('Every other session was signed out.').waitFor();
    assert.deepEqual(posts, ['POST /api/auth/reset'], 'only the button sent the token');
    await page.goBack();
    assert.doesNotMatch(page.url(), /token=/, 'the used reset link is not left in the history');

    await otherPage.reload();
    await otherPage.waitForURL(/\/sign-in\?next=/);
    await otherPage.getByRole('heading', { name: 'Sign in' }).waitFor();
    const oldPassword = await live.app.inject({ method: 'POST', url: '/api/auth/login', headers: { origin: live.baseUrl }, payload: { email, password } });
    assert.equal(oldPassword.statusCode, 401);
    const session = (await context.cookies()).find((cookie) => cookie.name === 'session')!.value;
    assert.equal((await live.app.inject({ method: 'GET', url: '/api/me', headers: asSession(session, live.baseUrl) })).statusCode, 200);
    await Promise.all([context.close(), other.close()]);
  });

  test('no page error or CSP violation on the way', () => {
    assert.deepEqual(problems, []);
  });
});
