import type { Kysely } from 'kysely';
import type { DB } from '../../src/db/database.ts';
import { strict as assert } from 'node:assert';
import { asBearer, settled, type TestAppOptions, type TestContext, type TestUser } from '../support/app.ts';
import { linkIn } from '../support/mail.ts';
import { createMachineTestApp, type Owner } from '../support/machines.ts';

export const VISA = '4242424242424242';
export const MASTERCARD = '5555555555554444';
export const REFUSED_CARD = '4000000000000002';
export const DECLINING_CARD = '4000000000009995';

/** The app with billing on (the test default is off). */
export function createBillingTestApp(options: TestAppOptions = {}): Promise<TestContext> {
  return createMachineTestApp({ ...options, env: { BILLING: 'on', ...options.env } });
}

export function card(number = VISA, overrides: Record<string, unknown> = {}) {
  return { number, expMonth: 12, expYear: 2030, cvc: '123', ...overrides };
}

/** Confirms the user's email address through the emailed link, as a person would. */
export async function confirmEmail(ctx: TestContext, user: TestUser): Promise<void> {
  await settled(ctx);
  const mail = ctx.smtp.to(user.email).filter((m) => m.subject === 'Confirm your email address').at(-1);
  assert.ok(mail, `no confirmation mail to ${user.email}`);
  const response = await ctx.app.inject({ method: 'POST', url: '/api/auth/verify', headers: { origin: ctx.config.publicUrl }, payload: { token: linkIn(mail, '/verify-email').token } });
  assert.equal(response.statusCode, 200, response.body);
}

export async function saveCard(owner: Owner, number = VISA): Promise<void> {
  const response = await owner.call('PUT', '/api/billing/payment-method', card(number));
  assert.equal(response.statusCode, 200, response.body);
}

/** POST /api/billing/top-ups, with an Idempotency-Key when given. */
export function topUp(ctx: TestContext, owner: Owner, amount: string, key?: string) {
  return ctx.app.inject({
    method: 'POST',
    url: '/api/billing/top-ups',
    headers: { ...asBearer(owner.key), ...(key === undefined ? {} : { 'idempotency-key': key }) },
    payload: { amount },
  });
}

export interface BillingBody {
  balance: string;
  currency: string;
  prices: Record<string, string>;
  paymentMethod: { brand: string; last4: string; expMonth: number; expYear: number; createdAt: string } | null;
  welcomeCredit: { amount: string; grantedAt: string | null; missing: string[] };
}

export async function billingOf(owner: Owner): Promise<BillingBody> {
  const response = await owner.call('GET', '/api/billing');
  assert.equal(response.statusCode, 200, response.body);
  return response.json();
}

/** Every ledger entry of the account, oldest first. */
export async function ledgerOf(ctx: TestContext, accountId: string) {
  return ctx.app.deps.db.selectFrom('billing_ledger').selectAll().where('account_id', '=', accountId).orderBy('id').execute();
}

/**
 * The machine's usage entries, checked against its running time alone: their
 * periods join end to end from `from` to `to`, and they sum to that time at
 * `pricePerHour` micro-dollars, rounded up once (not per entry).
 */
export async function assertChargedExactly(ctx: TestContext | Kysely<DB>, machineId: string, from: number, to: number | null, pricePerHour: number): Promise<number> {
  const db = 'app' in ctx ? ctx.app.deps.db : ctx;
  const entries = await db.selectFrom('billing_ledger').selectAll().where('machine_id', '=', machineId).orderBy('period_start').execute();
  assert.ok(entries.length > 0, 'charged at all');
  assert.equal(entries[0]!.period_start, from, 'the first period starts when the machine became running');
  for (let i = 1; i < entries.length; i++) assert.equal(entries[i]!.period_start, entries[i - 1]!.period_end, `period ${i} starts where the one before ended`);
  if (to !== null) assert.equal(entries.at(-1)!.period_end, to, 'the last period ends when the machine left running');
  to ??= entries.at(-1)!.period_end!;
  for (const entry of entries) {
    assert.equal(entry.kind, 'usage');
    assert.ok(entry.amount_micros < 0, 'usage entries are negative');
  }
  const charged = -entries.reduce((sum, entry) => sum + entry.amount_micros, 0);
  const exact = Number((BigInt(to - from) * BigInt(pricePerHour) + 3_599_999n) / 3_600_000n);
  assert.equal(charged, exact, `${to - from} ms at ${pricePerHour} µ$/h`);
  return entries.length;
}
