import { createServer } from 'node:net';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { createTestApp, registerUser, type TestAppOptions, type TestContext, type TestUser } from './app.ts';
import { eventually as pollUntil } from './receiver.ts';

/** Debian's Chromium; CI installs it (.ci/run). Never `npx playwright install`. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Short: a missing element should fail a test in seconds, not hang it. */
export const UI_TIMEOUT_MS = 5000;

export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, host, () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export interface LiveApp extends TestContext {
  /** The origin the browser uses, equal to PUBLIC_URL. */
  baseUrl: string;
}

/** The real app listening on 127.0.0.1, with PUBLIC_URL matching the origin the browser uses. */
export async function startLiveApp(options: TestAppOptions = {}): Promise<LiveApp> {
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const ctx = await createTestApp({ ...options, env: { PUBLIC_URL: baseUrl, ...options.env } });
  await ctx.app.listen({ port, host: '127.0.0.1' });
  return Object.assign(ctx, { baseUrl });
}

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    timeout: 20_000,
  });
}

/** A fresh browser profile (its own cookies) whose pages fail fast. */
export async function newContext(browser: Browser, options: Parameters<Browser['newContext']>[0] = {}): Promise<BrowserContext> {
  const context = await browser.newContext(options);
  context.setDefaultTimeout(UI_TIMEOUT_MS);
  context.setDefaultNavigationTimeout(UI_TIMEOUT_MS);
  return context;
}

/** Collects uncaught page errors and CSP violations, so a test can assert there were none. */
export function watchConsole(page: Page): string[] {
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(`pageerror: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error' && !/Failed to load resource/.test(message.text())) problems.push(`console: ${message.text()}`);
  });
  return problems;
}

/** Polls `read` until it returns something (mail sent after a response, for one), within the UI timeout. */
export function eventually<T>(read: () => T | undefined | Promise<T | undefined>, what: string, timeoutMs = UI_TIMEOUT_MS): Promise<T> {
  return pollUntil(read, timeoutMs, what);
}

/** Signs a browser profile in with a session token obtained through the API. */
export async function useSession(context: BrowserContext, live: LiveApp, sessionToken: string): Promise<void> {
  await context.addCookies([{ name: 'session', value: sessionToken, url: live.baseUrl, httpOnly: true, sameSite: 'Lax' }]);
}

/** Where most dashboard tests start: the live app, Chromium, and a page signed in as a new user. */
export interface SignedInPage {
  live: LiveApp;
  browser: Browser;
  user: TestUser;
  context: BrowserContext;
  page: Page;
  /** The page's errors and CSP violations so far (watchConsole). */
  problems: string[];
  /** Closes the browser, then the app. */
  close(): Promise<void>;
}

export async function openSignedInPage(
  options: { app?: TestAppOptions; user?: Parameters<typeof registerUser>[1]; clipboard?: boolean } = {},
): Promise<SignedInPage> {
  const live = await startLiveApp(options.app);
  let browser: Browser | undefined;
  const close = async () => {
    await browser?.close();
    await live.close();
  };
  try {
    browser = await launchBrowser();
    const user = await registerUser(live, options.user);
    const context = await newContext(browser);
    if (options.clipboard) await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: live.baseUrl });
    await useSession(context, live, user.session);
    const page = await context.newPage();
    return { live, browser, user, context, page, problems: watchConsole(page), close };
  } catch (error) {
    await close();
    throw error;
  }
}
