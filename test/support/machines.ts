import { strict as assert } from 'node:assert';
import { createHmac } from 'node:crypto';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { asBearer, createApiKey, createTestApp, registerUser, type TestAppOptions, type TestContext, type TestUser } from './app.ts';
import { listeningSuiteHooks, suiteHooks, type ListeningSuite, type StartedApp, type Suite } from './suite.ts';

export const BOOT_MS = 1000;

/** Boots take BOOT_MS of the injected clock; tests move the clock and run what falls due with workerPass(). */
export const MACHINE_ENV = { MACHINE_BOOT_MS: String(BOOT_MS) };

export function createMachineTestApp(options: TestAppOptions = {}): Promise<TestContext> {
  return createTestApp({ ...options, env: { ...MACHINE_ENV, ...options.env } });
}

export interface Owner {
  user: TestUser;
  key: string;
  /** Sends a request with the owner's API key. */
  call(method: InjectOptions['method'], url: string, payload?: unknown): Promise<LightMyRequestResponse>;
}

export async function newOwner(ctx: TestContext): Promise<Owner> {
  const user = await registerUser(ctx);
  const key = await createApiKey(ctx, user);
  return {
    user,
    key,
    call: (method, url, payload) =>
      ctx.app.inject({ method, url, headers: asBearer(key), ...(payload === undefined ? {} : { payload: payload as object }) }),
  };
}

async function startMachineApp(options: TestAppOptions): Promise<StartedApp> {
  const ctx = await createMachineTestApp(options);
  return { ctx, owner: await newOwner(ctx), close: () => ctx.close() };
}

/** Registers a describe block's hooks: a machine test app and its owner, in the returned suite once the block starts. */
export function machineSuite(options: TestAppOptions = {}): Suite {
  return suiteHooks(() => startMachineApp(options));
}

/** As machineSuite, with the app listening at `base` for MCP clients, which go in `clients` to be closed before the app. */
export function listeningMachineSuite(options: TestAppOptions = {}): ListeningSuite {
  return listeningSuiteHooks(() => startMachineApp(options));
}

export interface CreatedMachine {
  id: string;
  name: string;
  status: string;
  size: string;
  externalId: string;
  labels: Record<string, string>;
  expiresAt: string | null;
  createdAt: string;
  mcpToken: string;
}

export async function createMachine(owner: Owner, body: Record<string, unknown> = {}): Promise<CreatedMachine> {
  const response = await owner.call('POST', '/api/machines', { name: 'worker-1', ...body });
  assert.equal(response.statusCode, 201, response.body);
  return response.json();
}

/** Runs the jobs that are due, runs included, to their end: runs execute in the background, never in the request. */
export async function runsSettled(ctx: TestContext): Promise<void> {
  await ctx.app.jobs.drain();
}

/** Runs every job due at the clock's time (checks, expiries, ticks, refills), and the runs they release, to their end. */
export async function workerPass(ctx: TestContext): Promise<void> {
  await ctx.app.jobs.drain();
}

/** The job of a kind for one subject (a machine's check, a pool's refill), as the jobs table holds it. */
export async function jobOf(ctx: TestContext, kind: string, subject: string) {
  return ctx.app.deps.db.selectFrom('jobs').selectAll().where('key', '=', `${kind}:${subject}`).executeTakeFirst();
}

/** Moves the clock past a boot and runs one worker pass (and the runs the boot released). */
export async function finishBoot(ctx: TestContext): Promise<void> {
  ctx.clock.advance(BOOT_MS);
  await workerPass(ctx);
}

/** Starts a manual run and waits for its outcome: the run as GET /api/runs/{id} then shows it. */
export async function finishedRun(ctx: TestContext, owner: Owner, machineId: string, body: Record<string, unknown>): Promise<Record<string, unknown> & { id: string; status: string }> {
  const response = await owner.call('POST', `/api/machines/${machineId}/runs`, body);
  assert.equal(response.statusCode, 201, response.body);
  await runsSettled(ctx);
  return (await owner.call('GET', `/api/runs/${response.json().id}`)).json();
}

type ProviderMethod = 'boot' | 'observe' | 'stop' | 'destroy' | 'runCommand';

/**
 * Makes the app's provider fail (throw) or stall for some machines, the way a
 * real host does; returns a function that puts the provider back. The routes
 * and the worker hold the same provider object, so they all see the change.
 */
export function breakProvider(
  ctx: TestContext,
  method: ProviderMethod,
  affects: (machine: { id: string; name: string }) => boolean,
  behaviour: () => Promise<never> | Promise<void> = async () => {
    throw new Error(`host unreachable (${method})`);
  },
): () => void {
  const provider = ctx.app.machineProvider as unknown as Record<ProviderMethod, (machine: { id: string; name: string }, ...rest: unknown[]) => Promise<unknown>>;
  const original = provider[method];
  provider[method] = async (machine, ...rest) => {
    if (affects(machine)) {
      await behaviour();
    }
    return original.call(ctx.app.machineProvider, machine, ...rest);
  };
  return () => {
    provider[method] = original;
  };
}

/** A machine that is up: created, booted (its machine.created is already emitted). */
export async function runningMachine(ctx: TestContext, owner: Owner, body: Record<string, unknown> = {}): Promise<CreatedMachine> {
  const machine = await createMachine(owner, body);
  await finishBoot(ctx);
  const status = (await owner.call('GET', `/api/machines/${machine.id}`)).json().status;
  assert.equal(status, 'running');
  return machine;
}

export interface Envelope {
  id: string;
  type: string;
  createdAt: string;
  data: Record<string, unknown>;
}

/** Every event of the account, oldest first, as the envelope that will be delivered. */
export async function eventsOf(ctx: TestContext, owner: Owner): Promise<Envelope[]> {
  const rows = await ctx.app.deps.db.selectFrom('events').select(['payload', 'type']).where('account_id', '=', owner.user.id).orderBy('id').execute();
  return rows.map((row) => {
    const envelope = JSON.parse(row.payload) as Envelope;
    assert.equal(envelope.type, row.type);
    return envelope;
  });
}

/** Tracks which events are new since the last call. */
export function eventCursor(ctx: TestContext, owner: Owner): () => Promise<Envelope[]> {
  let seen = 0;
  return async () => {
    const all = await eventsOf(ctx, owner);
    const fresh = all.slice(seen);
    seen = all.length;
    return fresh;
  };
}

const EVENT_ID = /^evt_[0-9a-z]{26}$/;

function assertEnvelope(event: Envelope, type: string, now: number): void {
  assert.deepEqual(Object.keys(event).sort(), ['createdAt', 'data', 'id', 'type']);
  assert.match(event.id, EVENT_ID);
  assert.equal(event.type, type);
  assert.equal(event.createdAt, new Date(now).toISOString());
}

/** Spec 2.2, 2.3 and 6.2, field by field: the envelope of a machine.* event. */
export function assertMachineEvent(
  event: Envelope | undefined,
  type: string,
  machine: Pick<CreatedMachine, 'id' | 'name' | 'size' | 'externalId' | 'labels'>,
  status: string,
  detail: Record<string, unknown>,
  now: number,
): void {
  assert.ok(event, `expected a ${type} event`);
  assertEnvelope(event, type, now);
  assert.deepEqual(Object.keys(event.data).sort(), ['detail', 'machine']);
  assert.deepEqual(event.data.machine, {
    id: machine.id,
    name: machine.name,
    status,
    size: machine.size,
    externalId: machine.externalId,
    labels: machine.labels,
  });
  assert.deepEqual(event.data.detail, detail);
}

/** Spec 2.4 and 6.2: the envelope of a run.* event, with the four-field machine summary. */
export function assertRunEvent(
  event: Envelope | undefined,
  type: 'run.succeeded' | 'run.failed',
  run: { id: string; source: string; sourceId: string | null; status: string; output: string },
  machine: Pick<CreatedMachine, 'id' | 'name' | 'externalId' | 'labels'>,
  now: number,
): void {
  assert.ok(event, `expected a ${type} event`);
  assertEnvelope(event, type, now);
  assert.deepEqual(Object.keys(event.data).sort(), ['machine', 'run']);
  assert.deepEqual(event.data.run, run);
  assert.deepEqual(event.data.machine, { id: machine.id, name: machine.name, externalId: machine.externalId, labels: machine.labels });
}

/** An independent implementation of the signature scheme (CONTRACT 11): HMAC-SHA256 keyed with the whole secret's UTF-8 bytes. */
export function signatureHeader(secret: string, body: string, unixSeconds: number): string {
  const digest = createHmac('sha256', Buffer.from(secret, 'utf8')).update(`${unixSeconds}.${body}`).digest('hex');
  return `t=${unixSeconds},v1=${digest}`;
}

export function pathOf(url: string): string {
  const parsed = new URL(url);
  return parsed.pathname + parsed.search;
}
