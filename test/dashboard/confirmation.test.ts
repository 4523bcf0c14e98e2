import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { settled, type TestUser } from '../support/app.ts';
import { eventually, openSignedInPage, type LiveApp, type SignedInPage } from '../support/browser.ts';
import { linkIn } from '../support/mail.ts';

const SUBJECT = 'Confirm your email address';

describe('dashboard in Chromium: resending the confirmation email', () => {
  let live: LiveApp;
  let user: TestUser;
  let page: Page;
  let problems: string[];
  let ui: SignedInPage;

  before(async () => {
    ui = await openSignedInPage({ user: { name: 'Unconfirmed Ursula' } });
    ({ live, user, page, problems } = ui);
  });
  after(() => ui?.close());

  const confirmationMails = () => live.smtp.to(user.email).filter((mail) => mail.subject === SUBJECT);
  /** Waits for mail number `count` and returns its link path. */
  const mailNumber = async (count: number) => {
    await settled(live);
    const mail = await eventually(() => confirmationMails()[count - 1], `confirmation mail #${count}`);
    const url = new URL(linkIn(mail, '/verify-email').url);
    return url.pathname + url.search;
  };
  const resendButtons = () => page.getByRole('button', { name: 'Resend confirmation email' });

  test('/account offers one "Resend confirmation email" button, in the Profile card, and it sends a new mail (it showed two)', async () => {
    const first = await mailNumber(1);
    await page.goto(`${live.baseUrl}/account`);
    await page.getByRole('heading', { name: 'Profile' }).waitFor();
    await page.locator('#confirmation-banner').waitFor();
    assert.equal(await resendButtons().count(), 1, 'one button on the page');
    assert.equal(await page.locator('#profile').getByRole('button', { name: 'Resend confirmation email' }).count(), 1, 'the one beside the address');
    await resendButtons().click();
    await page.getByText(`Confirmation email sent to ${user.email}.`).waitFor();
    assert.notEqual(await mailNumber(2), first, 'a new link');
  });

  test('the banner on the other pages sends a new mail', async () => {
    // Not home: there the checklist's "Send the link again" is the one button (small-walls.test.ts).
    await page.getByRole('link', { name: 'Event webhooks' }).click();
    const banner = page.locator('#confirmation-banner');
    await banner.getByRole('button', { name: 'Resend confirmation email' }).click();
    await banner.getByText('Confirmation email sent.').waitFor();
    await mailNumber(3);
  });

  test('an expired link offers a new one, which arrives and works', async () => {
    const first = await mailNumber(1);
    live.clock.advance(25 * 3600_000);
    await page.goto(`${live.baseUrl}${first}`);
    await page.getByRole('button', { name: 'Confirm email address' }).click();
    await page.getByRole('heading', { name: 'This link no longer works' }).waitFor();
    await page.getByRole('button', { name: 'Send a new confirmation link' }).click();
    await page.getByText(`We sent a new link to ${user.email}.`).waitFor();
    const fresh = await mailNumber(4);

    await page.goto(`${live.baseUrl}${fresh}`);
    await page.getByRole('button', { name: 'Confirm email address' }).click();
    await page.getByRole('heading', { name: 'Email address confirmed' }).waitFor();
    await page.getByRole('link', { name: 'Continue to the dashboard' }).click();
    await page.waitForURL(`${live.baseUrl}/machines`);
    assert.equal(await page.locator('#confirmation-banner').count(), 0, 'no banner once confirmed');
  });

  test('no page error or CSP violation on the way', () => {
    assert.deepEqual(problems, []);
  });
});
