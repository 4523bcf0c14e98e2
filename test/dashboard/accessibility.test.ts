import { strict as assert } from 'node:assert';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { PUBLIC_DIR } from '../../src/dashboard/assets.ts';
import { asSession, settled as backgroundSettled, type TestUser } from '../support/app.ts';
import { launchBrowser, newContext, startLiveApp, useSession, watchConsole, type LiveApp } from '../support/browser.ts';
import { linkIn } from '../support/mail.ts';
import { contrastProblems, settled, unnamedControls, walkTabStops } from './page-audits.ts';
import { seedShowcase, SHOWCASE_ENV, type Showcase } from './showcase.ts';

/** The dialogs of the main actions, opened on their page. */
const DIALOGS = [['/machines', 'Create machine'], ['/event-webhooks', 'Add endpoint'], ['/account/api-keys', 'Create API key']] as const;

describe('dashboard in Chromium: names, keyboard, focus and contrast on every page', () => {
  let live: LiveApp;
  let browser: Browser;
  let showcase: Showcase;
  const problems: string[] = [];

  before(async () => {
    live = await startLiveApp({ env: SHOWCASE_ENV });
    browser = await launchBrowser();
    showcase = await seedShowcase(live);
  });
  after(async () => {
    await browser?.close();
    await live?.close();
  });

  const contextFor = async (options: { width?: number, scheme?: 'light' | 'dark', user?: TestUser | null } = {}): Promise<BrowserContext> => {
    // Reduced motion: no transition, so a hovered style is measured as it ends, not halfway.
    const context = await newContext(browser, { viewport: { width: options.width ?? 1280, height: 800 }, colorScheme: options.scheme ?? 'light', reducedMotion: 'reduce' });
    const user = options.user === undefined ? showcase.user : options.user;
    if (user) await useSession(context, live, user.session);
    return context;
  };
  const open = async (page: Page, path: string) => {
    await page.goto(`${live.baseUrl}${path}`);
    await settled(page);
  };
  /** Runs `check` on every page (signed out and in) and on the main dialogs; returns "path: problem" lines. */
  const everyPage = async (options: { width: number, scheme?: 'light' | 'dark' }, check: (page: Page) => Promise<string[]>) => {
    const found: string[] = [];
    for (const [user, paths] of [[null, showcase.guestPaths], [showcase.user, showcase.userPaths]] as const) {
      const context = await contextFor({ ...options, user });
      const page = await context.newPage();
      problems.push(...watchConsole(page));
      for (const path of paths) {
        await open(page, path);
        found.push(...(await check(page)).map((problem) => `${path}: ${problem}`));
      }
      if (user) {
        for (const [path, button] of [...DIALOGS, [`/machines/${showcase.machineId}`, `Output of run ${showcase.runId}`]]) {
          await open(page, path);
          await page.getByRole('button', { name: button }).click();
          await page.getByRole('dialog').waitFor();
          found.push(...(await check(page)).map((problem) => `${path}, dialog "${button}": ${problem}`));
        }
      }
      await context.close();
    }
    return found;
  };

  for (const width of [375, 1280]) {
    test(`${width} px: every control on every page has an accessible name`, async () => {
      assert.deepEqual(await everyPage({ width }, unnamedControls), []);
    });

    test(`${width} px: every tab stop has a name and shows a visible focus indicator`, async () => {
      const found = await everyPage({ width }, async (page) => {
        const stops = await walkTabStops(page);
        if (stops.length < 2) return [`only ${stops.length} tab stop(s): Tab does not move through the page`];
        return stops.flatMap((stop) => [
          ...(stop.problem ? [`${stop.label}: ${stop.problem}`] : []),
          ...(/""$/.test(stop.label) ? [`${stop.label}: a tab stop without a name`] : []),
        ]);
      });
      assert.deepEqual(found, []);
    });
  }

  for (const scheme of ['light', 'dark'] as const) {
    test(`${scheme} theme: text on every page reaches 4.5:1 (3:1 when large), at 375 and 1280 px`, async () => {
      const found = [
        ...(await everyPage({ width: 1280, scheme }, contrastProblems)),
        ...(await everyPage({ width: 375, scheme }, contrastProblems)),
      ];
      assert.deepEqual(found, []);
    });

    test(`${scheme} theme: every button, badge, alert and toast style reaches 4.5:1, plain and hovered (dark "Delete endpoint" was 2.71:1)`, async () => {
      // Every variant the stylesheet defines, so a style added later is checked too.
      const css = await readFile(join(PUBLIC_DIR, 'app.css'), 'utf8');
      const variants = [...new Set([...css.matchAll(/\.((btn|badge|alert|toast)--[a-z-]+)/g)].map((match) => [match[2]!, match[1]!].join(' ')))];
      assert.ok(variants.includes('btn btn--danger') && variants.includes('badge badge--warning'), `variants read from app.css: ${variants.join(', ')}`);
      const context = await contextFor({ scheme });
      const page = await context.newPage();
      problems.push(...watchConsole(page));
      await open(page, '/account');
      await page.evaluate((classes) => {
        const panel = document.createElement('section');
        panel.id = 'swatches';
        panel.className = 'card';
        for (const [index, className] of classes.entries()) {
          const tag = className.startsWith('btn ') ? 'button' : 'div';
          const swatch = document.createElement(tag);
          swatch.className = className;
          swatch.dataset.swatch = String(index);
          swatch.textContent = `Sample ${className}`;
          panel.append(swatch);
        }
        document.querySelector('main')!.prepend(panel);
      }, variants);
      const found = (await contrastProblems(page)).map((problem) => `plain: ${problem}`);
      for (const [index, className] of variants.entries()) {
        if (!className.startsWith('btn ')) continue;
        await page.hover(`[data-swatch="${index}"]`);
        found.push(...(await contrastProblems(page)).filter((problem) => problem.includes(`Sample ${className}`)).map((problem) => `hovered: ${problem}`));
      }
      assert.deepEqual(found, []);
      await context.close();
    });
  }

  test('keyboard alone: the main action of every page', async () => {
    const context = await contextFor({ user: null });
    const page = await context.newPage();
    problems.push(...watchConsole(page));
    /** Tabs forward until the focused element is `role "name"`; fails if it is never reached. */
    const tabTo = async (role: string, name: string | RegExp) => {
      for (let i = 0; i < 60; i++) {
        await page.keyboard.press('Tab');
        const focused = page.locator(':focus');
        if (await focused.count() === 0) continue;
        const matches = await page.getByRole(role as Parameters<Page['getByRole']>[0], { name, exact: true }).evaluateAll((elements) => (elements as Element[]).includes(document.activeElement!));
        if (matches) return;
      }
      throw new Error(`Tab never reached ${role} "${name}"`);
    };
    const start = async (path: string) => {
      await open(page, path);
      await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    };

    // Sign up, confirm the address from the emailed link.
    await start('/sign-up');
    const email = `keyboard-${Date.now()}@example.com`;
    await tabTo('textbox', 'Your name');
    await page.keyboard.type('Kay Board');
    await tabTo('textbox', 'Email address');
    await page.keyboard.type(email);
    await tabTo('textbox', 'Password');
    await page.keyboard.type('correct horse battery');
    await page.keyboard.press('Enter');
    await page.waitForURL(`${live.baseUrl}/machines`);
    await backgroundSettled(live);
    const verify = new URL(linkIn(live.smtp.to(email).at(-1)!, '/verify-email').url);
    await start(verify.pathname + verify.search);
    await tabTo('button', 'Confirm email address');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Email address confirmed' }).waitFor();

    // Create a machine; its token is shown; Escape closes and focus returns to the button.
    await start('/machines');
    await tabTo('button', 'Create machine');
    await page.keyboard.press('Enter');
    await page.keyboard.type('keyboard-machine');
    await page.keyboard.press('Enter');
    await page.getByRole('dialog').getByRole('textbox', { name: 'MCP token' }).waitFor();
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Create machine');

    // Add an endpoint; its secret is shown.
    await start('/event-webhooks');
    await tabTo('button', 'Add endpoint');
    await page.keyboard.press('Enter');
    await page.getByRole('textbox', { name: 'Endpoint URL' }).and(page.locator(':focus')).waitFor();
    await page.keyboard.type('https://127.0.0.1:9/keyboard');
    await page.keyboard.press('Enter');
    await page.getByRole('dialog').getByRole('textbox', { name: 'Signing secret' }).waitFor();
    await page.keyboard.press('Escape');

    // On the endpoint's page: send a test event and see its result.
    await start('/event-webhooks');
    await tabTo('link', 'https://127.0.0.1:9/keyboard');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: '127.0.0.1:9' }).waitFor();
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    await tabTo('button', 'Send test event');
    await page.keyboard.press('Enter');
    await page.locator('#test-result').waitFor();

    // Create an API key; sign out another session.
    await start('/account/api-keys');
    await tabTo('button', 'Create API key');
    await page.keyboard.press('Enter');
    await page.keyboard.type('keyboard key');
    await page.keyboard.press('Enter');
    await page.getByRole('dialog').getByRole('textbox', { name: 'API key' }).waitFor();
    await page.keyboard.press('Escape');
    const other = await live.app.inject({ method: 'POST', url: '/api/auth/login', headers: { origin: live.baseUrl, 'user-agent': 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0' }, payload: { email, password: 'correct horse battery' } });
    await start('/account/sessions');
    await tabTo('button', /^Sign out Firefox on Linux/);
    await page.keyboard.press('Enter');
    await page.getByRole('button', { name: /^Sign out Firefox on Linux/ }).waitFor({ state: 'detached' });
    const otherSession = other.cookies.find((cookie) => cookie.name === 'session')!.value;
    assert.equal((await live.app.inject({ method: 'GET', url: '/api/me', headers: asSession(otherSession, live.baseUrl) })).statusCode, 401);

    // Change the password.
    await start('/account');
    await tabTo('textbox', 'Current password');
    await page.keyboard.type('correct horse battery');
    await tabTo('textbox', 'New password');
    await page.keyboard.type('a keyboard only password');
    await tabTo('textbox', 'Repeat the new password');
    await page.keyboard.type('a keyboard only password');
    await page.keyboard.press('Enter');
    await page.getByText('Password changed.').waitFor();

    // Sign out, forgot password, reset from the link, sign in.
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    await tabTo('button', 'Sign out');
    await page.keyboard.press('Enter');
    await page.waitForURL(`${live.baseUrl}/sign-in`);
    await start('/sign-in');
    await tabTo('link', 'Forgot password?');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Reset your password' }).waitFor();
    await tabTo('textbox', 'Email address');
    await page.keyboard.type(email);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Check your email' }).waitFor();
    await backgroundSettled(live);
    const reset = new URL(linkIn(live.smtp.to(email).at(-1)!, '/reset-password').url);
    await start(reset.pathname + reset.search);
    await tabTo('textbox', 'New password');
    await page.keyboard.type('reset by keyboard alone');
    await tabTo('textbox', 'Repeat the new password');
    await page.keyboard.type('reset by keyboard alone');
    await page.keyboard.press('Enter');
    await page.waitForURL(`${live.baseUrl}/machines`);
    await settled(page);
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    await tabTo('button', 'Sign out');
    await page.keyboard.press('Enter');
    await page.waitForURL(`${live.baseUrl}/sign-in`);
    await start('/sign-in');
    await tabTo('textbox', 'Email address');
    await page.keyboard.type(email);
    await tabTo('textbox', 'Password');
    await page.keyboard.type('reset by keyboard alone');
    await page.keyboard.press('Enter');
    await page.waitForURL(`${live.baseUrl}/machines`);

    // The pages with no form: a link home from "not found"; the skip link on the error reference.
    await start('/no-such-page');
    await tabTo('link', 'Go to the dashboard');
    await page.keyboard.press('Enter');
    await page.waitForURL(`${live.baseUrl}/machines`);
    await start('/docs/errors');
    await tabTo('link', 'Skip to content');
    await page.keyboard.press('Enter');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'main');
    await context.close();
  });

  test('no page error or CSP violation on the way', () => {
    assert.deepEqual(problems, []);
  });
});
