import { inTransaction } from '../../src/db/transaction.ts';
import type { EventType } from '../../src/events/event-types.ts';
import type { EventEnvelope } from '../../src/events/envelope.ts';
import { emitEvent } from '../../src/event-webhooks/outbox.ts';
import { asSession, type TestContext, type TestUser } from '../support/app.ts';

/** Emits an event the way a domain does: inside a transaction with its change. */
export function emit(ctx: TestContext, accountId: string, type: EventType, data: Record<string, unknown> = { machine: { id: 'mch_test' }, detail: {} }): Promise<EventEnvelope> {
  return inTransaction(ctx.app.deps.database, (tx) => emitEvent(ctx.app.deps, tx, { accountId, type, data }));
}

export async function createEndpoint(ctx: TestContext, user: TestUser, body: Record<string, unknown>): Promise<{ id: string; secret: string; [key: string]: unknown }> {
  const response = await ctx.app.inject({ method: 'POST', url: '/api/event-webhooks', headers: asSession(user.session), payload: body });
  if (response.statusCode !== 201) throw new Error(`endpoint creation failed: ${response.statusCode} ${response.body}`);
  return response.json();
}

export async function deliveriesOf(ctx: TestContext, user: TestUser, endpointId?: string) {
  const response = await ctx.app.inject({
    method: 'GET',
    url: `/api/event-webhooks/deliveries${endpointId ? `?endpoint=${endpointId}` : ''}`,
    headers: asSession(user.session),
  });
  if (response.statusCode !== 200) throw new Error(`deliveries listing failed: ${response.statusCode} ${response.body}`);
  return response.json().data as Array<{
    id: string; endpointId: string; eventId: string; eventType: string; status: string; attempts: number;
    lastResponse: { status: number | null; body: string | null; error: string | null; durationMs: number | null; at: string } | null;
    nextAttemptAt: string | null; createdAt: string;
  }>;
}
