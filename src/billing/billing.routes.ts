import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { accountIdOf } from '../http/auth.ts';
import { DEFAULT_PAGE_SIZE, ListQuerySchema, pageSchema } from '../http/pagination.ts';
import { responses } from '../http/schemas.ts';
import {
  BillingSchema,
  BillingSettingsSchema,
  PaymentMethodBody,
  PaymentMethodSchema,
  TopUpBody,
  TopUpHeaders,
  StatementLineSchema,
  StatementQuery,
  TopUpSchema,
  TransactionSchema,
  UsageQuery,
  UsageSchema,
} from './billing.schemas.ts';
import { deletePaymentMethod, getBilling, getStatement, getUsage, listTransactions, savePaymentMethod, topUp } from './billing.service.ts';
import { formatMicros } from './money.ts';
import type { PaymentProvider } from './payment-provider.ts';

const tags = ['billing'];

export const billingRoutes: FastifyPluginAsyncTypebox<{ provider: PaymentProvider }> = async (app, { provider }) => {
  const { deps } = app;

  app.get('/api/billing', {
    schema: { tags, summary: 'The balance, prices per hour, saved card and welcome credit', response: responses({ 200: BillingSchema }) },
  }, async (request) => getBilling(deps, accountIdOf(request)));

  app.get('/api/billing/settings', {
    schema: { tags, summary: 'How billing is set up here: on or off, the low-balance threshold, test-mode cards', response: responses({ 200: BillingSettingsSchema }) },
  }, async () => ({
    enabled: deps.config.billing.enabled,
    lowBalance: formatMicros(deps.config.billing.lowBalanceMicros),
    testMode: provider.testMode,
  }));

  app.put('/api/billing/payment-method', {
    schema: {
      tags,
      summary: 'Save a card (replacing any other); the number and cvc go to the payment provider and are never stored or returned',
      body: PaymentMethodBody,
      response: responses({ 200: PaymentMethodSchema }),
    },
  }, async (request) => savePaymentMethod(deps, provider, accountIdOf(request), request.body));

  app.delete('/api/billing/payment-method', {
    schema: { tags, summary: 'Remove the saved card', response: responses({ 204: Type.Null() }) },
  }, async (request, reply) => {
    await deletePaymentMethod(deps, provider, accountIdOf(request));
    return reply.code(204).send(null);
  });

  app.post('/api/billing/top-ups', {
    schema: {
      tags,
      summary: 'Charge the saved card and add the amount to the balance; safe to retry with an Idempotency-Key',
      headers: TopUpHeaders,
      body: TopUpBody,
      response: responses({ 201: TopUpSchema }),
    },
  }, async (request, reply) => {
    const key = request.headers['idempotency-key'];
    return reply.code(201).send(await topUp(deps, provider, accountIdOf(request), request.body.amount, key));
  });

  app.get('/api/billing/transactions', {
    schema: { tags, summary: 'Ledger entries (welcome credit, top-ups, usage), newest first', querystring: ListQuerySchema, response: responses({ 200: pageSchema(TransactionSchema) }) },
  }, async (request) => listTransactions(deps, accountIdOf(request), request.query.limit ?? DEFAULT_PAGE_SIZE, request.query.cursor));

  app.get('/api/billing/statement', {
    schema: {
      tags,
      summary: 'The statement, newest day first: one line per machine per UTC day of usage, and each credit (welcome credit, top-up) as a line',
      querystring: StatementQuery,
      response: responses({ 200: pageSchema(StatementLineSchema) }),
    },
  }, async (request) => getStatement(deps, accountIdOf(request), request.query.limit ?? DEFAULT_PAGE_SIZE, request.query.cursor));

  app.get('/api/billing/usage', {
    schema: { tags, summary: 'Machine time charged per machine in a period (default: the last 30 days)', querystring: UsageQuery, response: responses({ 200: UsageSchema }) },
  }, async (request) => getUsage(deps, accountIdOf(request), request.query));
};
