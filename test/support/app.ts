import { mkdtemp } from 'node:fs/promises';
import { Writable } from 'node:stream';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LightMyRequestResponse } from 'fastify';
import { buildApp, type App, type BuildOptions } from '../../src/app.ts';
import { systemClock } from '../../src/shared/clock.ts';
import { loadConfig, type Config, type PasswordHashCost } from '../../src/config.ts';
import { manualClock, type ManualClock } from './clock.ts';
import { freshDatabase, type TestDatabase } from './database.ts';
import { startSmtpServer, type SmtpInbox } from './mail.ts';

export const PUBLIC_URL = 'http://localhost:3000';

/** Cheap argon2id for tests only: the cost is the one thing tests need to be fast. */
const FAST_HASH = { memoryKiB: 64, passes: 1, parallelism: 1 };

export interface TestContext {
  app: App;
  config: Readonly<Config>;
  clock: ManualClock;
  smtp: SmtpInbox;
  database: TestDatabase;
  /** Every response body the app sent, to check that none leaks a secret. */
  responses: string[];
  /** Every Set-Cookie header the app sent: session tokens it handed out, for the leak check. */
  cookies: string[];
  close(): Promise<void>;
}

export interface TestAppOptions {
  env?: Record<string, string>;
  /** Share one database between apps (several processes on one database). */
  database?: TestDatabase;
  sqlitePath?: string;
  smtp?: SmtpInbox;
  /** Real time instead of the manual clock: for tests where timers must meet the clock (delivery retries). */
  realClock?: boolean;
  buildOptions?: Omit<BuildOptions, 'clock' | 'databaseSchema' | 'logger'>;
  /** Runs before the app is ready: the last moment to add routes or hooks. */
  setup?: (app: App) => Promise<void> | void;
  /** Collects the app's log lines (at LOG_LEVEL info unless `env` says otherwise) instead of discarding them. */
  logs?: string[];
  /** Another argon2id cost than the fast one tests use (tests about the hashing itself). */
  passwordHashCost?: PasswordHashCost;
}

export async function createTestApp(options: TestAppOptions = {}): Promise<TestContext> {
  const database = options.database ?? (await freshDatabase(options.sqlitePath));
  const smtp = options.smtp ?? (await startSmtpServer());
  const mailDir = await mkdtemp(join(tmpdir(), 'mail-'));
  const config = Object.freeze({
    ...loadConfig({
      PUBLIC_URL,
      DATABASE_URL: database.url,
      SMTP_URL: smtp.url,
      MAIL_DIR: mailDir,
      LOG_LEVEL: options.logs ? 'info' : 'silent',
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'on',
      // Machines are free in tests that are not about billing (CONTRACT 12: BILLING=off); billing's own tests turn it on.
      BILLING: 'off',
      // Machines never stop for idleness in tests that move the clock for other reasons (hours of metering, say);
      // the idle stop's own tests ask for it (test/machines/idle-stop.test.ts).
      MACHINE_AUTO_STOP_MINUTES: '0',
      // Tests ask for Docker (test/support/docker.ts) or for auto's choice themselves: the default would take the engine where one runs.
      MACHINE_PROVIDER: 'simulated',
      ...options.env,
    }),
    passwordHashCost: options.passwordHashCost ?? FAST_HASH,
  });
  const clock = manualClock();
  const responses: string[] = [];
  const cookies: string[] = [];
  const logs = options.logs;
  const logDestination = logs && new Writable({
    write(chunk: Buffer, _encoding, callback) {
      logs.push(...chunk.toString().split('\n').filter((line) => line !== ''));
      callback();
    },
  });
  let app: App;
  try {
    app = await buildApp(config, {
      ...options.buildOptions,
      clock: options.realClock ? systemClock : clock,
      ...(database.schema ? { databaseSchema: database.schema } : {}),
      ...(logDestination ? { logDestination } : { logger: false as const }),
    });
    app.addHook('onSend', async (_request, reply, payload) => {
      if (typeof payload === 'string') responses.push(payload);
      const setCookie = reply.getHeader('set-cookie');
      if (setCookie !== undefined) cookies.push(...(Array.isArray(setCookie) ? setCookie : [String(setCookie)]));
      return payload;
    });
    await options.setup?.(app);
    await app.ready();
  } catch (error) {
    // A failed start must not leave the SMTP server open: the test process would never exit.
    if (!options.smtp) await smtp.close();
    if (!options.database) await database.drop();
    throw error;
  }
  return {
    app,
    config,
    clock,
    smtp,
    database,
    responses,
    cookies,
    async close() {
      await app.close();
      if (!options.smtp) await smtp.close();
      if (!options.database) await database.drop();
    },
  };
}

export function sessionCookieOf(response: LightMyRequestResponse): string {
  const cookie = response.cookies.find((c) => c.name === 'session' || c.name === '__Host-session');
  if (!cookie) throw new Error(`no session cookie in ${response.statusCode} ${response.body}`);
  return cookie.value;
}

/** Headers of a dashboard request: the cookie (`__Host-session` when the origin is https), from our own origin. */
export function asSession(sessionToken: string, publicUrl = PUBLIC_URL): Record<string, string> {
  const name = publicUrl.startsWith('https:') ? '__Host-session' : 'session';
  return { cookie: `${name}=${sessionToken}`, origin: publicUrl };
}

export function asBearer(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}

export interface TestUser {
  id: string;
  email: string;
  password: string;
  session: string;
}

let userCounter = 0;

/**
 * Each test user signs up from an address of its own (unless `ip` is given),
 * so the per-IP sign-up limit only bites in the tests that are about it.
 */
export async function registerUser(
  ctx: TestContext,
  overrides: Partial<{ email: string; password: string; name: string; ip: string }> = {},
): Promise<TestUser> {
  userCounter += 1;
  const email = overrides.email ?? `user${userCounter}-${Date.now()}@example.com`;
  const password = overrides.password ?? 'correct horse battery';
  const response = await ctx.app.inject({
    method: 'POST',
    url: '/api/auth/register',
    headers: { origin: ctx.config.publicUrl },
    remoteAddress: overrides.ip ?? `10.${(userCounter >> 16) & 255}.${(userCounter >> 8) & 255}.${userCounter & 255}`,
    payload: { email, password, name: overrides.name ?? 'Test User' },
  });
  if (response.statusCode !== 201) throw new Error(`register failed: ${response.statusCode} ${response.body}`);
  return { id: response.json().account.id, email: email.trim().toLowerCase(), password, session: sessionCookieOf(response) };
}

/** Signs the user in once more: a new session of the same account. */
export async function signIn(
  ctx: TestContext,
  user: Pick<TestUser, 'email' | 'password'>,
  options: { userAgent?: string; ip?: string } = {},
): Promise<string> {
  const response = await ctx.app.inject({
    method: 'POST',
    url: '/api/auth/login',
    headers: { origin: ctx.config.publicUrl, ...(options.userAgent === undefined ? {} : { 'user-agent': options.userAgent }) },
    ...(options.ip === undefined ? {} : { remoteAddress: options.ip }),
    payload: { email: user.email, password: user.password },
  });
  if (response.statusCode !== 200) throw new Error(`login failed: ${response.statusCode} ${response.body}`);
  return sessionCookieOf(response);
}

/** Confirms the user's password in their session (CONTRACT 17): what a test does when its clock has moved past the 10 minutes of recent authentication. */
export async function reauthenticate(ctx: TestContext, user: Pick<TestUser, 'session' | 'password'>): Promise<void> {
  const response = await ctx.app.inject({ method: 'POST', url: '/api/me/reauthenticate', headers: asSession(user.session, ctx.config.publicUrl), payload: { password: user.password } });
  if (response.statusCode !== 200) throw new Error(`reauthentication failed: ${response.statusCode} ${response.body}`);
}

export async function createApiKey(ctx: TestContext, user: TestUser, name = 'test key'): Promise<string> {
  const response = await ctx.app.inject({ method: 'POST', url: '/api/keys', headers: asSession(user.session, ctx.config.publicUrl), payload: { name } });
  if (response.statusCode !== 201) throw new Error(`key creation failed: ${response.statusCode} ${response.body}`);
  return response.json().key;
}

/** Runs the background work that is due (mail, above all) until nothing is. */
export async function settled(ctx: TestContext): Promise<void> {
  await ctx.app.jobs.drain();
}
