import fp from 'fastify-plugin';
import type { BillingConfig } from '../config.ts';
import { billingJobKinds, metering } from './billing.jobs.ts';
import { billingPlatformTools } from './billing.mcp.ts';
import { deleteOldIdempotencyKeys } from './billing.repository.ts';
import { billingRoutes } from './billing.routes.ts';
import { IDEMPOTENCY_RETENTION_MS } from './billing.service.ts';
import type { PaymentProvider } from './payment-provider.ts';
import { createSimulatedPaymentProvider } from './simulated.payment-provider.ts';

function createPaymentProvider(config: Readonly<BillingConfig>): PaymentProvider {
  switch (config.paymentProvider) {
    case 'simulated':
      return createSimulatedPaymentProvider();
  }
}

/**
 * Billing: the balance and its ledger, the welcome credit, cards through a
 * payment provider, top-ups, and metering of running machine time (one
 * recurring job for all processes). Machines and accounts call its public
 * files (metering.ts, enforcement.ts, welcome-credit.ts); it calls neither.
 */
export const billingPlugin = fp(
  async (app) => {
    const { deps } = app;
    const provider = createPaymentProvider(deps.config.billing);
    for (const kind of billingJobKinds(deps, app.mailer)) app.jobs.register(kind);
    app.maintenance.add('top-up idempotency keys', (now) => deleteOldIdempotencyKeys(deps.db, now - IDEMPOTENCY_RETENTION_MS));
    if (deps.config.billing.enabled) app.jobs.recur(metering(deps));
    if (deps.config.role === 'worker') return;
    await app.register(billingRoutes, { provider });
    app.platformMcpTools.push(billingPlatformTools());
  },
  { name: 'billing', dependencies: ['core', 'auth', 'jobs', 'mail', 'mcp', 'maintenance'] },
);
