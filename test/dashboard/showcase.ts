// An account with something on every page, in its widest form (long names,
// labels, a long description, failed deliveries, machines in every state,
// an unconfirmed address so the banner shows), for the layout and
// accessibility checks that visit every page.
import { strict as assert } from 'node:assert';
import { asSession, registerUser, signIn, type TestUser } from '../support/app.ts';
import type { LiveApp } from '../support/browser.ts';
import { startHttpsReceiver } from '../support/https-receiver.ts';
import { BOOT_MS, MACHINE_ENV } from '../support/machines.ts';

/** Boots finish when the test moves the clock; nothing polls on its own. */
export const SHOWCASE_ENV = { ...MACHINE_ENV, WEBHOOK_MAX_ATTEMPTS: '1' };

export interface Showcase {
  user: TestUser;
  endpointId: string;
  /** The running machine with runs (its page: runs, and files and processes the simulated provider does not offer). */
  machineId: string;
  /** A finished run of it with a long command and output. */
  runId: string;
  /** Every page path, signed out and signed in. */
  guestPaths: string[];
  userPaths: string[];
}

export async function seedShowcase(live: LiveApp): Promise<Showcase> {
  const user = await registerUser(live, { name: 'Ada Lovelace-Byron', email: 'ada.lovelace-byron.analytical-engine@example-company.com' });
  const call = async (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object) => {
    const response = await live.app.inject({ method, url, headers: asSession(user.session, live.baseUrl), ...(payload ? { payload } : {}) });
    assert.ok(response.statusCode < 300, `${method} ${url}: ${response.statusCode} ${response.body}`);
    return response.body ? response.json() : null;
  };

  for (const userAgent of ['Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:128.0) Gecko/20100101 Firefox/128.0', 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1']) {
    await signIn(live, user, { userAgent });
  }
  const key = (await call('POST', '/api/keys', { name: 'Production deploys from the main branch' })).key as string;
  await call('POST', '/api/keys', { name: 'Claude agent' });
  await live.app.inject({ method: 'GET', url: '/api/me', headers: { authorization: `Bearer ${key}` } });

  const receiver = await startHttpsReceiver();
  let endpointId: string;
  try {
    const endpoint = await call('POST', '/api/event-webhooks', {
      url: `${receiver.origin}/hooks/orders/with/a/rather/long/path/that/keeps/going?tenant=analytical-engine`,
      events: ['machine.created', 'machine.stopped', 'run.failed'],
      description: 'Orders service in the EU region, consumed by the fulfilment team and mirrored to the audit log',
    });
    endpointId = endpoint.id;
    const paused = await call('POST', '/api/event-webhooks', { url: 'https://hooks.example.com/machine-platform', events: ['*'], description: 'Audit log' });
    await call('PATCH', `/api/event-webhooks/${paused.id}`, { enabled: false });
    await call('POST', `/api/event-webhooks/${endpointId}/test`);
    receiver.answer = 503;
    await call('POST', `/api/event-webhooks/${endpointId}/test`);
  } finally {
    await receiver.close();
  }

  // A card and a top-up for the Billing page (the address stays unconfirmed: the welcome-credit checklist shows).
  await live.app.inject({ method: 'PUT', url: '/api/billing/payment-method', headers: asSession(user.session, live.baseUrl), payload: { number: '5555555555554444', expMonth: 8, expYear: 2031, cvc: '737' } });
  await call('POST', '/api/billing/top-ups', { amount: '125.50' });
  const expiresAt = new Date(live.clock.now() + 3 * 24 * 3600_000).toISOString();
  const running = await call('POST', '/api/machines', { name: 'research-agent-with-a-rather-long-name-for-layout', externalId: 'build-4821-nightly-eu-west', labels: { team: 'research', env: 'staging', owner: 'ada' }, expiresAt });
  const stopped = await call('POST', '/api/machines', { name: 'support-triage' });
  const destroyed = await call('POST', '/api/machines', { name: 'old-experiment' });
  live.clock.advance(BOOT_MS);
  await live.app.jobs.drain();
  await call('POST', `/api/machines/${stopped.id}/stop`);
  await call('DELETE', `/api/machines/${destroyed.id}`);
  live.clock.advance(BOOT_MS);
  await live.app.jobs.drain();
  await call('POST', '/api/machines', { name: 'nightly-build' });
  const run = await call('POST', `/api/machines/${running.id}/runs`, {
    command: 'cd /srv/checkouts/analytical-engine-with-a-long-repository-name && ./scripts/run-the-whole-test-suite.sh --reporter=verbose --shard=1/4',
    cwd: '/srv/checkouts',
  });
  await call('POST', `/api/machines/${running.id}/runs`, { command: 'make deploy; exit 2' });
  await live.app.jobs.drain();

  return {
    user,
    endpointId,
    machineId: running.id,
    runId: run.id,
    guestPaths: ['/sign-in', '/sign-up', '/forgot-password', '/reset-password?token=not-a-real-token', '/verify-email?token=not-a-real-token', '/no-such-page', '/docs/errors'],
    userPaths: ['/machines', `/machines/${running.id}`, '/event-webhooks', `/event-webhooks/${endpointId}`, '/account', '/account/security', '/account/sessions', '/account/api-keys', '/billing', '/events'],
  };
}
