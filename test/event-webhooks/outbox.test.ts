import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import type { CompiledQuery } from 'kysely';
import fc from 'fast-check';
import { inTransaction } from '../../src/db/transaction.ts';
import { subscribes } from '../../src/event-webhooks/endpoints.repository.ts';
import { createEndpoint, updateEndpoint } from '../../src/event-webhooks/endpoints.service.ts';
import { emitEvent } from '../../src/event-webhooks/outbox.ts';
import { ALL_EVENT_TYPES, type EventType } from '../../src/events/event-types.ts';
import { createTestApp, registerUser, type TestContext } from '../support/app.ts';
import { onPostgres, recordingStatements } from '../support/database.ts';

/**
 * The outbox chooses the endpoints an event goes to as it writes the
 * deliveries (src/event-webhooks/outbox.ts), on PostgreSQL in the SQL of
 * that statement: the rule it applies must be the rule of subscribes(), on
 * both engines, and every delivery must come with its job.
 */
describe('the outbox', () => {
  let ctx: TestContext;
  before(async () => {
    // No runner: every job stays in the table, to be looked at.
    ctx = await createTestApp({ env: { ROLE: 'api' } });
  });
  after(() => ctx.close());

  const someTypes = ALL_EVENT_TYPES.slice(0, 4);
  const subscription = fc.uniqueArray(fc.constantFrom<string>('*', ...someTypes), { minLength: 1, maxLength: 3 });
  const endpoint = fc.record({ events: subscription, enabled: fc.boolean() });

  test('an event goes to exactly the enabled endpoints that subscribe to its type, each delivery with its own job in its lane', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(endpoint, { minLength: 0, maxLength: 4 }), fc.constantFrom<EventType>(...someTypes), async (endpoints, type) => {
        const user = await registerUser(ctx);
        const created = [];
        for (const { events, enabled } of endpoints) {
          const row = await createEndpoint(ctx.app.deps, user.id, { url: 'https://example.com/hook', events });
          if (!enabled) await updateEndpoint(ctx.app.deps, user.id, row.id, { enabled: false });
          created.push({ id: row.id, events, enabled });
        }
        const event = await inTransaction(ctx.app.deps.database, (tx) => emitEvent(ctx.app.deps, tx, { accountId: user.id, type, data: {} }));

        const expected = created.filter((e) => e.enabled && subscribes(e.events, type)).map((e) => e.id).sort();
        const deliveries = await ctx.app.deps.db.selectFrom('deliveries').select(['id', 'endpoint_id', 'status', 'event_type']).where('event_id', '=', event.id).execute();
        assert.deepEqual(deliveries.map((d) => d.endpoint_id).sort(), expected);
        assert.ok(deliveries.every((d) => d.status === 'pending' && d.event_type === type));
        assert.equal(new Set(deliveries.map((d) => d.id)).size, deliveries.length, 'each delivery its own id');
        const jobs = deliveries.length === 0 ? [] : await ctx.app.deps.db.selectFrom('jobs').select(['id', 'lane', 'kind', 'locked_by']).where('id', 'in', deliveries.map((d) => d.id)).execute();
        assert.deepEqual(
          jobs.map((j) => [j.id, j.lane, j.kind, j.locked_by]).sort(),
          deliveries.map((d) => [d.id, d.endpoint_id, 'webhook.delivery', null]).sort(),
          'a job per delivery, in its endpoint lane, free for any process',
        );
        const stored = await ctx.app.deps.db.selectFrom('events').select('payload').where('id', '=', event.id).executeTakeFirstOrThrow();
        assert.deepEqual(JSON.parse(stored.payload), event, 'the event is stored whoever it goes to');
      }),
      { numRuns: 30 },
    );
  });

  test('on PostgreSQL, an emit is two statements: the endpoints read and locked, then one write of the event, deliveries and jobs', { skip: !onPostgres && 'Postgres only' }, async () => {
    const user = await registerUser(ctx);
    for (const events of [['*'], ['machine.created'], ['run.failed']]) await createEndpoint(ctx.app.deps, user.id, { url: 'https://example.com/hook', events });
    const sent: CompiledQuery[] = [];
    const event = await inTransaction(ctx.app.deps.database, (tx) =>
      emitEvent(ctx.app.deps, { db: recordingStatements(tx.db, sent), afterCommit: tx.afterCommit }, { accountId: user.id, type: 'machine.created', data: {} }),
    );
    const notices = sent.filter((query) => query.sql.includes('pg_notify'));
    const statements = sent.filter((query) => !notices.includes(query)).map((query) => query.sql);
    assert.equal(statements.length, 2, statements.map((text) => text.slice(0, 60)).join('\n'));
    assert.match(statements[0]!, /^select .* from event_endpoints .* for key share$/);
    assert.match(statements[1]!, /^with .*insert into "events".*insert into "deliveries".*insert into "jobs"/s);
    const deliveries = await ctx.app.deps.db.selectFrom('deliveries').select('id').where('event_id', '=', event.id).execute();
    assert.equal(deliveries.length, 2);
  });
});
