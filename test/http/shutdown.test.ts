import { strict as assert } from 'node:assert';
import { mkdtemp } from 'node:fs/promises';
import { Agent, request, type IncomingHttpHeaders } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Kysely } from 'kysely';
import { connectDatabase } from '../../src/db/connect.ts';
import type { DB } from '../../src/db/database.ts';
import { freshDatabase, urlWithSchema, type TestDatabase } from '../support/database.ts';
import { eventually, startReceiver, type Receiver } from '../support/receiver.ts';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.ts';

const WEBHOOK_TIMEOUT_MS = 5000;
/** The receiver holds each test delivery this long: the requests that wait on it are in flight when SIGTERM comes. */
const RECEIVER_DELAY_MS = 1000;
const CLIENTS = 8;

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

function call(agent: Agent, url: string, method: string, path: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(new URL(path, url), { method, agent, headers }, (res) => {
      let text = '';
      res.on('data', (chunk: Buffer) => (text += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * SIGTERM while keep-alive clients are busy, after which they go quiet without
 * closing their connections, as a draining load balancer does. The real
 * service, as a child process, on the suite's engine.
 */
describe('SIGTERM with busy-then-idle keep-alive clients', { timeout: 60_000 }, () => {
  let database: TestDatabase;
  let receiver: Receiver;
  let service: ServiceProcess;
  let db: Kysely<DB> | undefined;
  before(async () => {
    const dir = await mkdtemp(join(tmpdir(), 'shutdown-'));
    database = await freshDatabase(join(dir, 'service.db'));
    receiver = await startReceiver(() => ({ status: 200, body: 'ok', delayMs: RECEIVER_DELAY_MS }));
    service = await startServiceProcess({
      DATABASE_URL: urlWithSchema(database),
      MAIL_DIR: join(dir, 'mail'),
      RATE_LIMIT: 'off',
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'on',
      WEBHOOK_TIMEOUT_MS: String(WEBHOOK_TIMEOUT_MS),
    });
  });
  after(async () => {
    await service.kill('SIGKILL');
    await db?.destroy();
    await receiver.close();
    await database.drop();
  });

  test('the process exits within the webhook timeout plus a second, every request in flight answered and recorded', async (t) => {
    // Regression: the answers of requests in flight at SIGTERM kept their connections alive, and the process
    // waited for those idle connections until the 72 s keep-alive timeout (on PostgreSQL, where requests await
    // the database, some are always in flight; on SQLite a request runs from start to end in one go).
    const agent = new Agent({ keepAlive: true, maxSockets: CLIENTS });
    const json = { 'content-type': 'application/json', origin: service.url };
    const registered = await call(agent, service.url, 'POST', '/api/auth/register', json, JSON.stringify({ email: 'drain@example.com', password: 'correct horse battery', name: 'Drain' }));
    assert.equal(registered.status, 201, registered.body);
    const cookie = String(registered.headers['set-cookie']).split(';')[0]!;
    const key = JSON.parse((await call(agent, service.url, 'POST', '/api/keys', { ...json, cookie }, JSON.stringify({ name: 'drain' }))).body).key as string;
    const bearer = { 'content-type': 'application/json', authorization: `Bearer ${key}` };
    const created = await call(agent, service.url, 'POST', '/api/event-webhooks', bearer, JSON.stringify({ url: receiver.url }));
    assert.equal(created.status, 201, created.body);
    const endpointId = JSON.parse(created.body).id as string;

    // Busy: each client's request waits on the receiver; each client has its own keep-alive connection.
    const answers = Array.from({ length: CLIENTS }, () => call(agent, service.url, 'POST', `/api/event-webhooks/${endpointId}/test`, { authorization: `Bearer ${key}` }));
    await eventually(() => receiver.unanswered() === CLIENTS || undefined, 10_000, 'every test delivery at the receiver');
    // And a client that has sent half a request, and sends no more (a slow or stuck client).
    const halfRequest = connect(Number(new URL(service.url).port), '127.0.0.1');
    halfRequest.on('error', () => {});
    halfRequest.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n');
    await new Promise((resolve) => setTimeout(resolve, 50));
    const exited = new Promise<number | null>((resolve) => service.child.once('exit', (code) => resolve(code)));
    const signalled = performance.now();
    service.child.kill('SIGTERM');

    // Every request in flight is answered in full.
    const answered = await Promise.all(answers);
    for (const answer of answered) {
      assert.equal(answer.status, 200, answer.body);
      assert.deepEqual(JSON.parse(answer.body), { ok: true, status: 200, error: null });
    }
    // Then the clients go quiet, keeping whatever connections the server leaves open.
    const bound = WEBHOOK_TIMEOUT_MS + 1000 - (performance.now() - signalled);
    let timer: NodeJS.Timeout | undefined;
    const code = await Promise.race([exited, new Promise<'still running'>((resolve) => (timer = setTimeout(() => resolve('still running'), bound)))]);
    clearTimeout(timer);
    assert.equal(code, 0, `the process is ${code === 'still running' ? 'still running' : `exited with ${code}`} ${WEBHOOK_TIMEOUT_MS + 1000} ms after SIGTERM; stderr: ${service.stderr()}`);
    t.diagnostic(`exited ${Math.round(performance.now() - signalled)} ms after SIGTERM, the receiver holding each answer ${RECEIVER_DELAY_MS} ms`);
    agent.destroy();
    halfRequest.destroy();
    // The answers told the clients that their connections end.
    for (const answer of answered) assert.equal(answer.headers.connection, 'close');

    // Nothing in flight was lost: every test delivery is on record as delivered.
    db = connectDatabase(database.url, database.schema ? { schema: database.schema } : {}).db;
    const rows = await db.selectFrom('deliveries').select(['status', 'attempts']).where('endpoint_id', '=', endpointId).execute();
    assert.equal(rows.length, CLIENTS);
    for (const row of rows) assert.deepEqual({ ...row }, { status: 'delivered', attempts: 1 });
    assert.equal(receiver.requests.length, CLIENTS);
  });
});
