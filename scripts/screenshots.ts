// npm run screenshots: starts the service on a temporary database, seeds
// accounts through the API, and saves every dashboard page, its empty and
// error states and its main dialogs at 1280 px and 375 px wide into
// screenshots/ (a few also in the dark theme). Every page is also laid out at
// 768 and 1024 px and checked for horizontal overflow at all four widths.
// Exits non-zero when a page cannot be produced or does not fit.
import { mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { buildApp, type App } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import type { Mailer, MailMessage } from '../src/mail/mailer.ts';
import { freePort, launchBrowser } from '../test/support/browser.ts';
import { startHttpsReceiver } from '../test/support/https-receiver.ts';
import { LAYOUT_WIDTHS, layoutProblems } from '../test/dashboard/page-audits.ts';

const OUT_DIR = resolve(import.meta.dirname, '..', 'screenshots');
/** Saved as PNG; the other widths of LAYOUT_WIDTHS are only checked. */
const SAVED_WIDTHS = new Set([1280, 375]);
const PASSWORD = 'correct horse battery staple';
const BROWSER_USER_AGENT = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36';
const MISSING_ENDPOINT = 'ep_01jd0000000000000000000000';

interface Shot {
  /** Runs before the page is opened: to make its API fail, for the error states. */
  before?: (page: Page) => Promise<void>;
  /** Runs once the page is drawn: open a dialog, fill a form. */
  prepare?: (page: Page) => Promise<void>;
  dark?: boolean;
}
type Shooter = (name: string, path: string, shot?: Shot) => Promise<void>;

const workDir = await mkdtemp(join(tmpdir(), 'screenshots-'));
const port = await freePort();
const baseUrl = `http://127.0.0.1:${port}`;
const mails: MailMessage[] = [];
const mailer: Mailer = { send: async (message) => void mails.push(message), close: () => {} };
const config = loadConfig({
  PORT: String(port),
  PUBLIC_URL: baseUrl,
  DATABASE_URL: `sqlite:${join(workDir, 'service.db')}`,
  MAIL_DIR: join(workDir, 'mail'),
  LOG_LEVEL: 'warn',
  RATE_LIMIT: 'off',
  WEBHOOK_ALLOW_PRIVATE_TARGETS: 'on',
  WEBHOOK_MAX_ATTEMPTS: '1',
  MACHINE_PROVIDER: 'simulated',
  MACHINE_BOOT_MS: '300',
});
const app: App = await buildApp(config, { mailer, logger: false });
await app.listen({ port, host: '127.0.0.1' });
const browser = await launchBrowser();
const saved: string[] = [];
const layoutFailures: string[] = [];

try {
  await mkdir(OUT_DIR, { recursive: true });
  for (const name of await readdir(OUT_DIR)) if (name.endsWith('.png')) await rm(join(OUT_DIR, name));
  await run();
  console.log(`${saved.length} screenshots saved in ${OUT_DIR}`);
  if (layoutFailures.length > 0) {
    console.error(`\nPages wider than their screen or container:\n  ${layoutFailures.join('\n  ')}`);
    process.exitCode = 1;
  }
} catch (error) {
  console.error(`\nScreenshots failed: a page could not be produced.\n${error instanceof Error ? error.stack : String(error)}`);
  process.exitCode = 1;
} finally {
  await browser.close();
  await app.close();
  await rm(workDir, { recursive: true, force: true });
}

async function run() {
  const guest = await browser.newContext();
  const shoot = screenshotter(guest);
  await shoot('sign-in', '/sign-in', { dark: true });
  await shoot('sign-in-error', '/sign-in', {
    prepare: async (page) => {
      await page.getByLabel('Email address').fill('ada@example.com');
      await page.getByLabel('Password', { exact: true }).fill('not the password');
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('alert').waitFor();
    },
  });
  await shoot('sign-up', '/sign-up');
  await shoot('forgot-password', '/forgot-password');
  await shoot('not-found', '/no-such-page');
  await shoot('error-codes', '/docs/errors');

  const ada = await api('POST', '/api/auth/register', { email: 'ada@example.com', password: PASSWORD, name: 'Ada Lovelace' }, undefined, { 'user-agent': BROWSER_USER_AGENT });
  const session = ada.cookie;
  await shoot('verify-email', linkPath(await mailFor('Confirm your email address')));
  await shoot('verify-email-expired', '/verify-email?token=this-link-was-already-used', {
    prepare: async (page) => {
      await page.getByRole('button', { name: 'Confirm email address' }).click();
      await page.getByRole('heading', { name: 'This link no longer works' }).waitFor();
    },
  });
  await api('POST', '/api/auth/forgot', { email: 'ada@example.com' });
  await shoot('reset-password', linkPath(await mailFor('Reset your password')));

  const signedIn = await signedInContext(session);
  const shootIn = screenshotter(signedIn);
  // A brand-new account: every list empty, the confirmation banner up.
  await shootIn('machines-empty', '/machines');
  await shootIn('event-webhooks-empty', '/event-webhooks');
  await shootIn('api-keys-empty', '/account/api-keys');
  await shootIn('applications-empty', '/account/applications');
  await shootIn('account-unconfirmed', '/account');
  await api('POST', '/api/auth/verify', { token: new URL(linkUrl(await mailFor('Confirm your email address'))).searchParams.get('token') });
  await shootIn('account', '/account', { dark: true });

  for (const userAgent of ['Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:128.0) Gecko/20100101 Firefox/128.0', 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1']) {
    await api('POST', '/api/auth/login', { email: 'ada@example.com', password: PASSWORD }, undefined, { 'user-agent': userAgent });
  }
  await shootIn('sessions', '/account/sessions');

  const deployKey = (await api('POST', '/api/keys', { name: 'Production deploys' }, session)).body.key as string;
  await api('POST', '/api/keys', { name: 'Claude agent' }, session);
  await app.inject({ method: 'GET', url: '/api/me', headers: { authorization: `Bearer ${deployKey}` } });
  await shootIn('api-keys', '/account/api-keys');
  await shootIn('api-keys-error', '/account/api-keys', { before: failing('/api/keys') });
  await shootIn('api-key-created', '/account/api-keys', {
    prepare: async (page) => {
      await page.getByRole('button', { name: 'Create API key' }).click();
      await page.getByRole('dialog').getByLabel('Name').fill('Staging CI');
      await page.getByRole('dialog').getByRole('button', { name: 'Create key' }).click();
      await page.getByRole('dialog').getByRole('textbox', { name: 'API key' }).waitFor();
    },
  });
  await shootIn('api-key-revoke', '/account/api-keys', {
    prepare: async (page) => {
      await page.getByRole('button', { name: 'Revoke Claude agent' }).click();
      await page.getByRole('dialog').waitFor();
    },
  });

  await applicationPages(session, shootIn);
  await webhookPages(session, shootIn);
  await machinePages(session, shootIn);
}

/** An MCP client asking for consent, then connected (OAuth, CONTRACT 14). */
async function applicationPages(session: string, shootIn: ReturnType<typeof screenshotter>) {
  const redirectUri = 'https://connector.example/oauth/callback';
  const registered = await app.inject({ method: 'POST', url: '/oauth/register', payload: { client_name: 'Claude', redirect_uris: [redirectUri], token_endpoint_auth_method: 'none' } });
  const clientId = registered.json().client_id as string;
  const consentUid = async () => {
    const query = new URLSearchParams({ response_type: 'code', client_id: clientId, redirect_uri: redirectUri, code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', code_challenge_method: 'S256', scope: 'mcp' });
    const response = await app.inject({ method: 'GET', url: `/oauth/authorize?${query}` });
    return new URL(String(response.headers.location), baseUrl).searchParams.get('uid')!;
  };
  await shootIn('consent', `/oauth/consent?uid=${await consentUid()}`);
  await shootIn('consent-expired', '/oauth/consent?uid=no-such-request');
  await api('POST', `/api/oauth/consent/${await consentUid()}/allow`, undefined, session);
  await shootIn('applications', '/account/applications');
}

async function webhookPages(session: string, shoot: Shooter) {
  const receiver = await startHttpsReceiver();
  try {
    const orders = (await api('POST', '/api/event-webhooks', { url: `${receiver.origin}/hooks/orders`, events: ['machine.created', 'machine.stopped', 'run.failed'], description: 'Orders service' }, session)).body;
    const paused = (await api('POST', '/api/event-webhooks', { url: 'https://hooks.example.com/machine-platform', events: ['*'], description: 'Audit log' }, session)).body;
    await api('PATCH', `/api/event-webhooks/${paused.id}`, { enabled: false }, session);
    await api('POST', `/api/event-webhooks/${orders.id}/test`, undefined, session);
    receiver.answer = 503;
    await api('POST', `/api/event-webhooks/${orders.id}/test`, undefined, session);
    receiver.answer = 200;
    await shoot('event-webhooks', '/event-webhooks');
    await shoot('event-webhooks-error', '/event-webhooks', { before: failing('/api/event-webhooks') });
    await shoot('event-webhook', `/event-webhooks/${orders.id}`, { dark: true });
    await shoot('event-webhook-paused', `/event-webhooks/${paused.id}`);
    await shoot('event-webhook-missing', `/event-webhooks/${MISSING_ENDPOINT}`);
    await shoot('event-webhook-delivery', `/event-webhooks/${orders.id}`, {
      prepare: async (page) => {
        await page.locator('tr[data-status="failed"] button', { hasText: 'Details' }).first().click();
        await page.getByRole('dialog').waitFor();
      },
    });
    await shoot('event-webhook-test-failed', `/event-webhooks/${orders.id}`, {
      prepare: async (page) => {
        receiver.answer = 500;
        await page.getByRole('button', { name: 'Send test event' }).click();
        await page.locator('#test-result', { hasText: 'Test event failed.' }).waitFor();
        receiver.answer = 200;
      },
    });
    await shoot('event-webhook-create', '/event-webhooks', {
      prepare: async (page) => {
        await page.getByRole('button', { name: 'Add endpoint' }).click();
        const dialog = page.getByRole('dialog');
        await dialog.getByRole('textbox', { name: 'Endpoint URL' }).fill('https://api.example.com/webhooks/machines');
        await dialog.getByLabel('Description').fill('Billing');
        await dialog.getByText('Selected events').click();
        await dialog.getByRole('checkbox', { name: /machine\.created/ }).check();
        await dialog.getByRole('checkbox', { name: /machine\.destroyed/ }).check();
      },
    });
    await shoot('event-webhook-create-error', '/event-webhooks', {
      prepare: async (page) => {
        await page.getByRole('button', { name: 'Add endpoint' }).click();
        const dialog = page.getByRole('dialog');
        await dialog.getByRole('textbox', { name: 'Endpoint URL' }).fill('https://user:secret@api.example.com/webhooks');
        await dialog.getByRole('button', { name: 'Add endpoint' }).click();
        await dialog.locator('[aria-invalid="true"]').first().waitFor();
      },
    });
    await shoot('event-webhook-created', '/event-webhooks', {
      prepare: async (page) => {
        await page.getByRole('button', { name: 'Add endpoint' }).click();
        const dialog = page.getByRole('dialog');
        await dialog.getByRole('textbox', { name: 'Endpoint URL' }).fill(`${receiver.origin}/hooks/billing`);
        await dialog.getByRole('button', { name: 'Add endpoint' }).click();
        await dialog.getByRole('textbox', { name: 'Signing secret' }).waitFor();
      },
    });
  } finally {
    await receiver.close();
  }
}

async function machinePages(session: string, shoot: Shooter) {
  // Billing is on: a card (test mode) and a top-up before machines can run.
  await shoot('billing-new', '/billing');
  await api('PUT', '/api/billing/payment-method', { number: '4242424242424242', expMonth: 12, expYear: 2030, cvc: '123' }, session);
  await api('POST', '/api/billing/top-ups', { amount: '50.00' }, session);
  await api('POST', '/api/machines', { name: 'research-agent', labels: { team: 'research', env: 'staging' }, expiresAt: new Date(Date.now() + 3 * 24 * 3600_000).toISOString() }, session);
  await api('POST', '/api/machines', { name: 'nightly-build', externalId: 'build-4821' }, session);
  const stopped = (await api('POST', '/api/machines', { name: 'support-triage' }, session)).body;
  const retired = (await api('POST', '/api/machines', { name: 'old-experiment' }, session)).body;
  await waitFor(async () => (await api('GET', '/api/machines?limit=100', undefined, session)).body.data.every((machine: { status: string }) => machine.status === 'running'));
  await api('POST', `/api/machines/${stopped.id}/stop`, undefined, session);
  await api('DELETE', `/api/machines/${retired.id}`, undefined, session);
  await waitFor(async () => (await api('GET', `/api/machines/${stopped.id}`, undefined, session)).body.status === 'stopped');
  await shoot('machines', '/machines', { dark: true });
  await shoot('machines-with-destroyed', '/machines', {
    prepare: async (page) => {
      await page.getByRole('checkbox', { name: /^Show destroyed/ }).check();
    },
  });
  await shoot('machines-error', '/machines', { before: failing('/api/machines') });
  await shoot('billing', '/billing', { dark: true });
  await shoot('machine-create', '/machines', {
    prepare: async (page) => {
      await page.getByRole('button', { name: 'Create machine' }).click();
      await page.getByRole('dialog').getByLabel('Name').fill('data-pipeline');
      await page.getByRole('dialog').getByLabel('Labels').fill('team=data');
    },
  });
  await shoot('machine-new-token', '/machines', {
    prepare: async (page) => {
      await page.getByRole('button', { name: 'New MCP token for research-agent' }).click();
      await page.getByRole('dialog').getByRole('button', { name: 'Issue new token' }).click();
      await page.getByRole('dialog', { name: 'New MCP token for research-agent' }).getByRole('textbox', { name: 'MCP token' }).waitFor();
    },
  });
  await shoot('machine-live-view', '/machines', {
    prepare: async (page) => {
      await page.getByRole('button', { name: 'Live view of research-agent' }).click();
      await page.getByRole('dialog').getByRole('link', { name: 'Open live view' }).waitFor();
    },
  });
  // Last: each width creates one more machine.
  await shoot('machine-created', '/machines', {
    prepare: async (page) => {
      await page.getByRole('button', { name: 'Create machine' }).click();
      await page.getByRole('dialog').getByLabel('Name').fill('scratch');
      await page.getByRole('dialog').getByRole('button', { name: 'Create machine' }).click();
      await page.getByRole('dialog').getByRole('textbox', { name: 'MCP token' }).waitFor();
    },
  });
}

/** A list whose API answers 503, as it does while the service restarts: the page shows the problem's detail. */
function failing(path: string) {
  return async (page: Page) => {
    await page.route((url) => url.pathname === path, (route) => route.fulfill({
      status: 503,
      contentType: 'application/problem+json',
      body: JSON.stringify({ type: `${baseUrl}/docs/errors#service_unavailable`, title: 'Service unavailable', status: 503, detail: 'The service is shutting down or not ready.', code: 'service_unavailable' }),
    }));
  };
}

async function signedInContext(session: string): Promise<BrowserContext> {
  const context = await browser.newContext({ userAgent: BROWSER_USER_AGENT });
  await context.addCookies([{ name: 'session', value: session, url: baseUrl, httpOnly: true, sameSite: 'Lax' }]);
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: baseUrl });
  return context;
}

function screenshotter(context: BrowserContext): Shooter {
  return async (name, path, shot = {}) => {
    const runs = [...LAYOUT_WIDTHS.map((width) => ({ width, scheme: 'light' as const })), ...(shot.dark ? [1280, 375].map((width) => ({ width, scheme: 'dark' as const })) : [])];
    for (const { width, scheme } of runs) {
      const page = await context.newPage();
      try {
        await page.emulateMedia({ colorScheme: scheme, reducedMotion: 'reduce' });
        await page.setViewportSize({ width, height: width === 375 ? 812 : 800 });
        await shot.before?.(page);
        await page.goto(`${baseUrl}${path}`);
        await settled(page);
        if (shot.prepare) {
          await shot.prepare(page);
          await settled(page);
        }
        if (scheme === 'light') layoutFailures.push(...(await layoutProblems(page)).map((problem) => `${name} at ${width} px: ${problem}`));
        if (!SAVED_WIDTHS.has(width)) continue;
        // An open dialog is shown as a person sees it: the viewport, not the whole page behind it.
        const dialogOpen = await page.locator('dialog[open]').count() > 0;
        const file = `${name}${scheme === 'dark' ? '-dark' : ''}-${width}.png`;
        await page.screenshot({ path: join(OUT_DIR, file), fullPage: !dialogOpen, animations: 'disabled', caret: 'hide' });
        saved.push(file);
      } catch (error) {
        throw new Error(`${name} (${path}) at ${width} px, ${scheme}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
      } finally {
        await page.close();
      }
    }
    console.log(`  ${name}`);
  };
}

async function settled(page: Page) {
  await page.waitForLoadState('networkidle');
  await page.waitForFunction(() => !document.querySelector('#app[aria-busy], .loading, [aria-busy="true"]'), undefined, { timeout: 10_000 });
}

async function api(method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, payload?: unknown, session?: string, headers: Record<string, string> = {}) {
  const response = await app.inject({
    method,
    url,
    headers: { origin: baseUrl, ...(session ? { cookie: `session=${session}` } : {}), ...headers },
    ...(payload === undefined ? {} : { payload: payload as object }),
  });
  if (response.statusCode >= 400) throw new Error(`${method} ${url}: ${response.statusCode} ${response.body}`);
  const cookie = response.cookies.find((c) => c.name === 'session')?.value ?? '';
  return { body: response.body ? response.json() : null, cookie };
}

async function waitFor(check: () => Promise<boolean>, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out while seeding');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function mailFor(subject: string): Promise<MailMessage> {
  await app.jobs.drain();
  const mail = mails.filter((message) => message.subject === subject).at(-1);
  if (!mail) throw new Error(`no mail "${subject}"`);
  return mail;
}

function linkUrl(mail: MailMessage): string {
  const match = /https?:\/\/\S+\?token=\S+/.exec(mail.text);
  if (!match) throw new Error(`no link in "${mail.subject}"`);
  return match[0];
}

function linkPath(mail: MailMessage): string {
  const url = new URL(linkUrl(mail));
  return url.pathname + url.search;
}
