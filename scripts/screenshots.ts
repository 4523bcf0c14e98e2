// npm run screenshots: starts the service on a temporary database, seeds an
// account through the API, and saves every dashboard page at 1280 px and
// 375 px wide into screenshots/. The webhook and machine pages are taken only
// when this build has their APIs.
import { mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Page } from 'playwright-core';
import { buildApp, type App } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import type { Mailer, MailMessage } from '../src/mail/mailer.ts';
import { freePort, launchBrowser } from '../test/support/browser.ts';
import { startHttpsReceiver } from '../test/support/https-receiver.ts';

const OUT_DIR = resolve(import.meta.dirname, '..', 'screenshots');
const WIDTHS = [1280, 375] as const;
const PASSWORD = 'correct horse battery staple';
const BROWSER_USER_AGENT = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36';

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
});
const app: App = await buildApp(config, { mailer, logger: false });
await app.listen({ port, host: '127.0.0.1' });
const browser = await launchBrowser();

try {
  await mkdir(OUT_DIR, { recursive: true });
  for (const name of await readdir(OUT_DIR)) if (name.endsWith('.png')) await rm(join(OUT_DIR, name));
  await run();
  console.log(`Screenshots saved in ${OUT_DIR}`);
} finally {
  await browser.close();
  await app.close();
  await rm(workDir, { recursive: true, force: true });
}

async function run() {
  const guest = await browser.newContext();
  const shoot = screenshotter(guest);
  await shoot('sign-in', '/sign-in');
  await shoot('sign-up', '/sign-up');
  await shoot('forgot-password', '/forgot-password');
  await shoot('not-found', '/no-such-page');
  await shoot('error-codes', '/docs/errors');

  const ada = await api('POST', '/api/auth/register', { email: 'ada@example.com', password: PASSWORD, name: 'Ada Lovelace' }, undefined, { 'user-agent': BROWSER_USER_AGENT });
  const session = ada.cookie;
  await shoot('verify-email', linkPath(await mailFor('Confirm your email address')));
  await api('POST', '/api/auth/forgot', { email: 'ada@example.com' });
  await shoot('reset-password', linkPath(await mailFor('Reset your password')));

  const signedIn = await browser.newContext({ userAgent: BROWSER_USER_AGENT });
  await signedIn.addCookies([{ name: 'session', value: session, url: baseUrl, httpOnly: true, sameSite: 'Lax' }]);
  await signedIn.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: baseUrl });
  const shootIn = screenshotter(signedIn);
  await shootIn('account-unconfirmed', '/account');
  await api('POST', '/api/auth/verify', { token: new URL(linkUrl(await mailFor('Confirm your email address'))).searchParams.get('token') });
  await shootIn('account', '/account');

  for (const userAgent of ['Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:128.0) Gecko/20100101 Firefox/128.0', 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1']) {
    await api('POST', '/api/auth/login', { email: 'ada@example.com', password: PASSWORD }, undefined, { 'user-agent': userAgent });
  }
  await shootIn('sessions', '/account/sessions');

  const deployKey = (await api('POST', '/api/keys', { name: 'Production deploys' }, session)).body.key as string;
  await api('POST', '/api/keys', { name: 'Claude agent' }, session);
  await app.inject({ method: 'GET', url: '/api/me', headers: { authorization: `Bearer ${deployKey}` } });
  await shootIn('api-keys', '/account/api-keys');
  await shootIn('api-key-created', '/account/api-keys', async (page) => {
    await page.getByRole('button', { name: 'Create API key' }).click();
    await page.getByRole('dialog').getByLabel('Name').fill('Staging CI');
    await page.getByRole('dialog').getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('dialog').getByRole('textbox', { name: 'API key' }).waitFor();
  });
  await shootIn('api-key-revoke', '/account/api-keys', async (page) => {
    await page.getByRole('button', { name: 'Revoke Claude agent' }).click();
  });

  if (app.hasRoute({ method: 'GET', url: '/api/event-webhooks' })) await webhookPages(session, shootIn);
  else console.log('Note: no event-webhook API in this build; the webhook pages were not captured.');
  if (app.hasRoute({ method: 'GET', url: '/api/machines' })) await machinePages(session, shootIn);
  else console.log('Note: no machine API in this build; the machine pages were not captured.');
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
    await shoot('event-webhook', `/event-webhooks/${orders.id}`);
    await shoot('event-webhook-delivery', `/event-webhooks/${orders.id}`, async (page) => {
      await page.locator('tr[data-status="failed"] button', { hasText: 'Details' }).first().click();
    });
    await shoot('event-webhook-create', '/event-webhooks', async (page) => {
      await page.getByRole('button', { name: 'Add endpoint' }).click();
      const dialog = page.getByRole('dialog');
      await dialog.getByRole('textbox', { name: 'Endpoint URL' }).fill('https://api.example.com/webhooks/machines');
      await dialog.getByLabel('Description').fill('Billing');
      await dialog.getByText('Selected events').click();
      await dialog.getByRole('checkbox', { name: /machine\.created/ }).check();
      await dialog.getByRole('checkbox', { name: /machine\.destroyed/ }).check();
    });
    await shoot('event-webhook-created', '/event-webhooks', async (page) => {
      await page.getByRole('button', { name: 'Add endpoint' }).click();
      const dialog = page.getByRole('dialog');
      await dialog.getByRole('textbox', { name: 'Endpoint URL' }).fill(`${receiver.origin}/hooks/billing`);
      await dialog.getByRole('button', { name: 'Add endpoint' }).click();
      await dialog.getByRole('textbox', { name: 'Signing secret' }).waitFor();
    });
  } finally {
    await receiver.close();
  }
}

async function machinePages(session: string, shoot: Shooter) {
  await api('POST', '/api/machines', { name: 'research-agent', labels: { team: 'research', env: 'staging' } }, session);
  await api('POST', '/api/machines', { name: 'nightly-build', externalId: 'build-4821' }, session);
  const stopped = (await api('POST', '/api/machines', { name: 'support-triage' }, session)).body;
  await waitFor(async () => (await api('GET', `/api/machines/${stopped.id}`, undefined, session)).body.status === 'running');
  await api('POST', `/api/machines/${stopped.id}/stop`, undefined, session);
  await shoot('machines', '/machines');
  await shoot('machine-create', '/machines', async (page) => {
    await page.getByRole('button', { name: 'Create machine' }).click();
    await page.getByRole('dialog').getByLabel('Name').fill('data-pipeline');
    await page.getByRole('dialog').getByLabel('Labels').fill('team=data');
  });
  await shoot('machine-created', '/machines', async (page) => {
    await page.getByRole('button', { name: 'Create machine' }).click();
    await page.getByRole('dialog').getByLabel('Name').fill('scratch');
    await page.getByRole('dialog').getByRole('button', { name: 'Create machine' }).click();
    await page.getByRole('dialog').getByRole('textbox', { name: 'MCP token' }).waitFor();
  });
  await shoot('machine-live-view', '/machines', async (page) => {
    await page.locator('tr[data-status="running"]').first().getByRole('button', { name: /^Live view/ }).click();
    await page.getByRole('dialog').getByRole('link', { name: 'Open live view' }).waitFor();
  });
}

type Shooter = (name: string, path: string, prepare?: (page: Page) => Promise<void>) => Promise<void>;

function screenshotter(context: Awaited<ReturnType<typeof browser.newContext>>): Shooter {
  return async (name, path, prepare) => {
    for (const width of WIDTHS) {
      const page = await context.newPage();
      await page.setViewportSize({ width, height: width === 375 ? 812 : 800 });
      await page.goto(`${baseUrl}${path}`);
      await settled(page);
      if (prepare) {
        await prepare(page);
        await settled(page);
      }
      // An open dialog is shown as a person sees it: the viewport, not the whole page behind it.
      const dialogOpen = await page.locator('dialog[open]').count() > 0;
      await page.screenshot({ path: join(OUT_DIR, `${name}-${width}.png`), fullPage: !dialogOpen, animations: 'disabled', caret: 'hide' });
      await page.close();
    }
    console.log(`  ${name}`);
  };
}

async function settled(page: Page) {
  await page.waitForLoadState('networkidle');
  await page.waitForFunction(() => !document.querySelector('#app[aria-busy], .loading, [aria-busy="true"]'));
}

async function api(method: 'GET' | 'POST' | 'PATCH', url: string, payload?: unknown, session?: string, headers: Record<string, string> = {}) {
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

async function waitFor(check: () => Promise<boolean>, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out while seeding');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function mailFor(subject: string): Promise<MailMessage> {
  await app.deps.background.idle();
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
