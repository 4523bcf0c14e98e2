import { strict as assert } from 'node:assert';
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { asBearer, asSession, createApiKey, signIn, type TestContext } from '../support/app.ts';
import { createMachine, createMachineTestApp, finishBoot, newOwner, type Owner } from '../support/machines.ts';
import { bodyVariant, hostileJson, hostileStrings, parameterText, validValue, type JsonSchema } from '../support/schema-arbitraries.ts';

/**
 * A property-based fuzz of the public API, driven by GET /api/openapi.json:
 * every operation, with malformed variants of every parameter and body, under
 * every kind of credential. No answer may be a 5xx; every 4xx is RFC 9457
 * problem+json, except where the API documents another format (the MCP
 * transport's JSON-RPC errors, the live view's HTML page).
 * FUZZ_RUNS (runs per operation) and FUZZ_SEED reproduce or deepen a run.
 */
const RUNS_PER_OPERATION = Number(process.env.FUZZ_RUNS ?? 60);
const SEED = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);

interface Parameter {
  in: 'query' | 'path' | 'header';
  name: string;
  required?: boolean;
  schema: JsonSchema;
}

interface Operation {
  method: string;
  path: string;
  parameters: Parameter[];
  body: JsonSchema | null;
}

const CONTENT_TYPES = ['application/json', 'application/json; charset=utf-8', 'APPLICATION/JSON', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json; charset=latin1', 'application/jsonx', ''];
const MCP_ACCEPT = 'application/json, text/event-stream';
/** Percent-encoding; a lone surrogate (no character of any URL) becomes U+FFFD first. */
const encode = (text: string) => encodeURIComponent(text.toWellFormed());

interface Fixture {
  /** Identifiers to put in paths, by the route's first segment: the owner's own first, then another account's and unknown ones. */
  ids: Record<string, string[]>;
  /** Request headers of each kind of credential, valid or not. */
  credentials: Record<string, Record<string, string>>;
}

const unknownId = (prefix: string) => `${prefix}_01jz0000000000000000000000`;

describe('fuzz: every operation of the OpenAPI document, malformed, under every credential', { timeout: 180_000 }, () => {
  let ctx: TestContext;
  let stranger: { owner: Owner; machineId: string; endpointId: string };
  let operations: Operation[];
  let mcpTools: string[];
  const logs: string[] = [];

  before(async () => {
    ctx = await createMachineTestApp({
      logs,
      env: { RATE_LIMIT: 'off', WEBHOOK_TIMEOUT_MS: '1000', WEBHOOK_RETRY_DELAYS: '1h' },
      // No name resolves: endpoints the fuzz registers are never reached over the network.
      buildOptions: { resolveAll: (hostname, callback) => callback(Object.assign(new Error(`ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), []) },
    });
    const other = await newOwner(ctx);
    stranger = {
      owner: other,
      machineId: (await createMachine(other)).id,
      endpointId: (await other.call('POST', '/api/event-webhooks', { url: 'https://hooks.example/b' })).json().id,
    };
    const document = (await ctx.app.inject({ method: 'GET', url: '/api/openapi.json' })).json() as {
      paths: Record<string, Record<string, { parameters?: Parameter[]; requestBody?: { content: Record<string, { schema: JsonSchema }> } }>>;
    };
    operations = Object.entries(document.paths).flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, operation]) => ({
        method: method.toUpperCase(),
        path,
        parameters: operation.parameters ?? [],
        body: operation.requestBody?.content['application/json']?.schema ?? null,
      })),
    );
    const mcp = (url: string) => ctx.app.inject({ method: 'POST', url, headers: { ...asBearer(other.key), accept: MCP_ACCEPT }, payload: { jsonrpc: '2.0', id: 1, method: 'tools/list' } });
    const tools = [...(await mcp('/api/mcp')).json().result.tools, ...(await mcp(`/api/machines/${stranger.machineId}/mcp`)).json().result.tools];
    mcpTools = tools.map((tool: { name: string }) => tool.name);
  });
  after(() => ctx.close());

  /**
   * A new account with one of everything (a running machine, an endpoint with a delivery, a pool, a schedule, an
   * inbound webhook, a run, a spare key and session, a live view), so that each operation is fuzzed from the same
   * state, whatever the ones before deleted, revoked or signed out.
   */
  async function provision(): Promise<Fixture> {
    const owner = await newOwner(ctx);
    const machine = await createMachine(owner);
    await finishBoot(ctx);
    const endpoint = (await owner.call('POST', '/api/event-webhooks', { url: 'https://hooks.example/a' })).json();
    await owner.call('POST', `/api/event-webhooks/${endpoint.id}/test`);
    const delivery = (await owner.call('GET', '/api/event-webhooks/deliveries')).json().data[0];
    const pool = (await owner.call('POST', '/api/pools', { name: 'fuzz', size: 'small', count: 1 })).json();
    const schedule = (await owner.call('POST', '/api/schedules', { machineId: machine.id, name: 'fuzz', cron: '*/5 * * * *', command: 'true' })).json();
    const inbound = (await owner.call('POST', '/api/inbound-webhooks', { machineId: machine.id, name: 'fuzz', command: 'true' })).json();
    const run = (await owner.call('POST', `/api/machines/${machine.id}/runs`, { command: 'echo fuzz' })).json();
    const liveView = (await owner.call('POST', `/api/machines/${machine.id}/live-view`)).json();
    const keyIdOf = async (key: string) => (await owner.call('GET', '/api/keys')).json().data.find((listed: { prefix: string }) => key.startsWith(listed.prefix)).id as string;
    const spareKeyId = await keyIdOf(await createApiKey(ctx, owner.user, 'spare'));
    const revoked = await createApiKey(ctx, owner.user, 'revoked');
    await owner.call('DELETE', `/api/keys/${await keyIdOf(revoked)}`);
    const spareSession = await signIn(ctx, owner.user);
    const spareSessionId = (await ctx.app.inject({ method: 'GET', url: '/api/me/sessions', headers: asSession(spareSession) })).json().data.find((session: { current: boolean }) => session.current).id;
    return {
      ids: {
        machines: [machine.id, stranger.machineId, unknownId('mch')],
        'event-webhooks': [endpoint.id, delivery.id, stranger.endpointId, unknownId('ep'), unknownId('dlv')],
        pools: [pool.id, unknownId('pool')],
        schedules: [schedule.id, unknownId('sch')],
        'inbound-webhooks': [inbound.id, unknownId('ihk')],
        runs: [run.id, unknownId('run')],
        keys: [spareKeyId, unknownId('key')],
        me: [spareSessionId, unknownId('ses')],
        hooks: [new URL(inbound.url).pathname.split('/').at(-1)!, 'x'],
        live: [new URL(liveView.url).pathname.split('/').at(-1)!, 'x'],
      },
      credentials: {
        none: {},
        'a malformed Authorization header': { authorization: 'Bearer' },
        'another scheme': { authorization: 'Basic dXNlcjpwYXNz' },
        'an unknown API key': asBearer(`tmk_${'A'.repeat(38)}`),
        'a revoked API key': asBearer(revoked),
        'an unknown kind of token': asBearer('tmx_whatever'),
        'the API key': asBearer(owner.key),
        'the machine token': asBearer(machine.mcpToken),
        "another account's API key": asBearer(stranger.owner.key),
        'the session cookie': asSession(owner.user.session),
        'the session cookie, cross-site': { ...asSession(owner.user.session), origin: 'https://evil.example' },
        'the session cookie without Origin': { cookie: asSession(owner.user.session).cookie! },
      },
    };
  }

  /** Whether a 4xx may be in another format than problem+json, as docs/api.md documents. */
  function documentedOtherFormat(operation: Operation, request: InjectOptions, response: LightMyRequestResponse): boolean {
    const type = String(response.headers['content-type'] ?? '');
    if (operation.path.startsWith('/live/')) return type.startsWith('text/html');
    if (operation.path.endsWith('/mcp') && type.startsWith('application/json')) {
      if (request.method === 'HEAD') return true;
      const body = response.json();
      return body.jsonrpc === '2.0' && typeof body.error?.code === 'number' && typeof body.error?.message === 'string';
    }
    return false;
  }

  function assertAnswer(operation: Operation, request: InjectOptions, response: LightMyRequestResponse): void {
    const what = () => `${request.method} ${request.url} ${JSON.stringify(request.headers)} ${String(request.payload ?? '').slice(0, 300)}\n→ ${response.statusCode} ${response.body.slice(0, 500)}`;
    assert.ok(response.statusCode < 500, `a 5xx: ${what()}`);
    if (operation.path.endsWith('/mcp') && response.statusCode === 200 && request.method === 'POST') {
      // A tool's unexpected failure is no HTTP 5xx but a tool error with status 500: as much a bug.
      const messages = [response.json()].flat() as Array<{ result?: { isError?: boolean; structuredContent?: { error?: { status?: number } } } }>;
      for (const message of messages) assert.ok((message.result?.structuredContent?.error?.status ?? 0) < 500, `a tool failed unexpectedly: ${what()}`);
    }
    if (response.statusCode < 400 || documentedOtherFormat(operation, request, response)) return;
    assert.match(String(response.headers['content-type']), /^application\/problem\+json(;|$)/, `a 4xx that is not problem+json: ${what()}`);
    if (request.method === 'HEAD') return;
    const body = response.json();
    assert.deepEqual(Object.keys(body).sort(), ['code', 'detail', 'status', 'title', 'type'], what());
    assert.equal(body.status, response.statusCode, what());
    assert.equal(body.type, `${ctx.config.publicUrl}/docs/errors#${body.code}`, what());
  }

  /**
   * One request of `operation`: a valid baseline (the owner's credential, their own ids, a body and query the
   * schemas accept) in which one part is malformed (a path parameter, one query parameter, the body, the
   * credential, one header, the method), or none, or all of them at once. One at a time, so that no mistake
   * hides another behind an earlier 4xx and malformed input meets every layer, the handlers' included.
   */
  function requestOf(operation: Operation, { ids, credentials }: Fixture): fc.Arbitrary<InjectOptions> {
    const section = operation.path.split('/')[operation.path.startsWith('/api/') ? 2 : 1]!;
    const pathIds = [...(ids[section] ?? []), ...(section === 'machines' || section === 'event-webhooks' ? [] : ids.machines!)];
    const isMcp = operation.path.endsWith('/mcp');
    const queryParameters = operation.parameters.filter((parameter) => parameter.in === 'query');
    const targets = ['none', 'none', 'path', 'body', 'body', 'credential', 'credential', 'content-type', 'content-encoding', 'origin', 'host', 'method', 'extra-query', 'everything', ...queryParameters.flatMap((parameter) => [`query:${parameter.name}`, `query:${parameter.name}`])];

    const validPath = fc.constantFrom(...pathIds);
    const malformedPath = fc.oneof(
      fc.oneof(hostileStrings, fc.string({ unit: 'binary', maxLength: 30 })).map((text) => encode(text)),
      fc.constantFrom('%zz', '%', '..', '.', '%2e%2e', 'x'.repeat(150), '%00', '%E2%82', ''),
    );
    const validQuery = fc.record(Object.fromEntries(queryParameters.map((parameter) => [
      parameter.name,
      fc.option(validValue(parameter.schema).map((value) => [typeof value === 'string' ? value : JSON.stringify(value)]), { nil: undefined }),
    ])));
    const malformedQuery = fc.record(Object.fromEntries(queryParameters.map((parameter) => [
      parameter.name,
      fc.oneof({ weight: 3, arbitrary: parameterText(parameter.schema).map((text) => [text]) }, { weight: 1, arbitrary: fc.array(parameterText(parameter.schema), { minLength: 2, maxLength: 3 }) }),
    ])));
    const extraQuery = fc.tuple(fc.oneof(fc.constantFrom('limit', 'cursor', 'token', '__proto__', 'constructor', 'status', 'a[b]'), fc.string({ maxLength: 8 })), fc.oneof(hostileStrings, fc.string({ maxLength: 8 })));

    const validMcp = fc.oneof(
      fc.record({ jsonrpc: fc.constant('2.0'), id: fc.integer({ min: 1, max: 1000 }), method: fc.constantFrom('initialize', 'tools/list', 'ping'), params: fc.constant({ protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'fuzz', version: '1' } }) }),
      fc.record({ jsonrpc: fc.constant('2.0'), id: fc.integer({ min: 1, max: 1000 }), method: fc.constant('tools/call'), params: fc.record({ name: fc.constantFrom(...mcpTools), arguments: fc.dictionary(fc.constantFrom('id', 'url', 'events', 'name', 'command', 'limit', 'size', 'labels', 'stopAfter', 'description', 'cursor', 'status', 'pool', 'expiresAt'), hostileJson, { maxKeys: 4 }) }) }),
    );
    const malformedMcp = fc.oneof(
      fc.record({ jsonrpc: fc.constant('2.0'), id: fc.oneof(fc.integer(), fc.string({ maxLength: 5 }), fc.constant(null)), method: fc.constant('tools/call'), params: fc.record({ name: fc.oneof(fc.constantFrom(...mcpTools), hostileStrings), arguments: hostileJson }) }),
      fc.record({ jsonrpc: fc.constant('2.0'), id: fc.integer(), method: fc.oneof(fc.constantFrom('resources/list', 'nonsense', 'notifications/initialized'), hostileStrings), params: fc.option(hostileJson, { nil: undefined }) }),
      fc.array(fc.record({ jsonrpc: fc.constant('2.0'), id: fc.integer(), method: fc.constantFrom('tools/list', 'ping') }), { maxLength: 3 }),
      hostileJson,
    );
    const validBody = (isMcp ? validMcp : operation.body ? validValue(operation.body) : fc.constant(undefined)).map((value) => (value === undefined ? undefined : JSON.stringify(value)));
    const rawText = fc.oneof(fc.string({ unit: 'binary', maxLength: 60 }), fc.constantFrom(
      '{', '{"a":', '[1,', '{"count":1e400}', '{"limit":Infinity}', 'null', '"x"', '{"a":1,"a":2}', '\uFEFF{}', '',
      `${'['.repeat(100_000)}${']'.repeat(100_000)}`, `${'{"a":'.repeat(50_000)}1${'}'.repeat(50_000)}`, 'x'.repeat(1024 * 1024 + 1),
    ));
    const malformedBody = fc.oneof(
      { weight: 4, arbitrary: (isMcp ? malformedMcp : operation.body ? bodyVariant(operation.body) : fc.oneof(fc.constant({}), hostileJson)).map((value) => JSON.stringify(value)) },
      { weight: 1, arbitrary: rawText },
    );

    return fc.record({
      target: fc.constantFrom(...targets),
      paths: fc.tuple(validPath, malformedPath),
      queries: fc.tuple(validQuery, malformedQuery),
      extra: extraQuery,
      bodies: fc.tuple(validBody, malformedBody),
      credentials: fc.tuple(fc.constantFrom(...(isMcp || section === 'machines' ? ['the API key', 'the session cookie', 'the machine token'] : ['the API key', 'the session cookie'])), fc.constantFrom(...Object.keys(credentials))),
      contentType: fc.constantFrom(...CONTENT_TYPES),
      encoding: fc.constantFrom('gzip', 'br', 'identity', 'gzip, identity', 'x-unknown'),
      origin: fc.constantFrom(ctx.config.publicUrl, 'https://evil.example', 'null'),
      host: fc.constantFrom(' ', 'a b', 'evil@x', '[::1', 'x:99999', 'localhost:3000', 'x/y'),
      method: fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD'),
    }).map((parts) => {
      const malformed = (part: string) => parts.target === part || parts.target === 'everything';
      const path = operation.path.replace(/\{[^}]+\}/g, () => (malformed('path') ? parts.paths[1] : parts.paths[0]));
      const query: Record<string, string[] | undefined> = { ...parts.queries[0] };
      for (const parameter of queryParameters) if (malformed(`query:${parameter.name}`)) query[parameter.name] = parts.queries[1][parameter.name];
      const pairs = Object.entries(query).flatMap(([name, texts]) => (texts ?? []).map((text) => `${encode(name)}=${encode(text)}`));
      if (malformed('extra-query')) pairs.push(`${encode(parts.extra[0])}=${encode(parts.extra[1])}`);
      const body = malformed('body') ? parts.bodies[1] : parts.bodies[0];
      const headers: Record<string, string> = { ...credentials[malformed('credential') ? parts.credentials[1] : parts.credentials[0]] };
      if (isMcp) headers.accept = MCP_ACCEPT;
      const contentType = malformed('content-type') ? parts.contentType : 'application/json';
      if (body !== undefined && contentType !== '') headers['content-type'] = contentType;
      if (malformed('content-encoding')) headers['content-encoding'] = parts.encoding;
      if (malformed('origin')) headers.origin = parts.origin;
      if (malformed('host')) headers.host = parts.host;
      const payload = body !== undefined && headers['content-encoding'] === 'gzip' ? gzipSync(body) : body;
      const method = malformed('method') ? parts.method : operation.method;
      return { method: method as InjectOptions['method'], url: pairs.length > 0 ? `${path}?${pairs.join('&')}` : path, headers, ...(payload === undefined ? {} : { payload }) };
    });
  }

  test('no answer is a 5xx, and every 4xx is problem+json (unless the format is documented otherwise)', async (t) => {
    let requests = 0;
    const answered = new Set<string>();
    const statuses = new Map<number, number>();
    let fixture: Fixture | null = null;
    for (const operation of operations) {
      // A fresh account after anything that may have changed the last one (GETs change nothing a fixture holds).
      if (fixture === null || operation.method !== 'GET') fixture = await provision();
      await fc.assert(
        fc.asyncProperty(requestOf(operation, fixture), async (request) => {
          const response = await ctx.app.inject(request);
          requests += 1;
          statuses.set(response.statusCode, (statuses.get(response.statusCode) ?? 0) + 1);
          if (response.statusCode < 300) answered.add(`${operation.method} ${operation.path}`);
          assertAnswer(operation, request, response);
        }),
        { numRuns: RUNS_PER_OPERATION, ...(SEED === undefined ? {} : { seed: SEED }) },
      );
    }
    await ctx.app.jobs.drain();
    const errors = logs.map((line) => JSON.parse(line) as { level: number; msg: string; err?: { message: string } }).filter((line) => line.level >= 50);
    assert.deepEqual(errors.map((line) => `${line.msg}: ${line.err?.message}`), [], 'nothing was logged as an error');
    const neverServed = operations.map((operation) => `${operation.method} ${operation.path}`).filter((operation) => !answered.has(operation));
    t.diagnostic(`never answered with a success: ${neverServed.join(', ') || 'none'}`);
    t.diagnostic(`${requests} requests over ${operations.length} operations; statuses ${JSON.stringify(Object.fromEntries([...statuses].sort(([a], [b]) => a - b)))}`);
  });

  test('over the wire: requests Node\'s HTTP parser sees first are answered, never with a 5xx, every 4xx as problem+json', async () => {
    const { credentials } = await provision();
    await ctx.app.listen({ port: 0, host: '127.0.0.1' });
    const port = (ctx.app.server.address() as { port: number }).port;
    const paths = operations.map((operation) => operation.path.replace(/\{[^}]+\}/g, 'x'));
    const token = credentials['the API key']!.authorization!;
    const line = fc.record({
      method: fc.oneof({ weight: 5, arbitrary: fc.constantFrom('GET', 'POST', 'PATCH', 'DELETE', 'HEAD') }, { weight: 1, arbitrary: fc.constantFrom('CONNECT', 'OPTIONS', 'TRACE', 'get', 'PRI', 'FOO', 'M-SEARCH', '') }),
      target: fc.oneof({ weight: 5, arbitrary: fc.constantFrom(...paths) }, { weight: 1, arbitrary: fc.constantFrom('*', '//x', 'http://[::1/x', 'http://localhost/api/me', 'example.com:443', '/a b', '/\u00e9', '/%', '', '/?a=%zz', `/${'a'.repeat(20_000)}`) }),
      version: fc.oneof({ weight: 8, arbitrary: fc.constant('HTTP/1.1') }, { weight: 1, arbitrary: fc.constantFrom('HTTP/1.0', 'HTTP/2.0', 'HTTP/1.2', 'HTTP/0.9', 'HTTP/11', '') }),
    });
    const header = fc.oneof(
      fc.constantFrom('Host: localhost', `Authorization: ${token}`, 'Content-Type: application/json', 'Accept: application/json, text/event-stream', `Origin: ${ctx.config.publicUrl}`),
      fc.constantFrom('Host:', 'Host: a b', 'Host: localhost', 'Expect: 100-continue', 'Expect: nonsense', 'Content-Encoding: gzip', 'Transfer-Encoding: gzip',
        'X Y: z', 'X-Y: a\r\n b', 'X-Y: \u0001', 'Upgrade: websocket', 'Connection: upgrade', 'Content-Length: abc', 'Content-Length: -1', 'Content-Length: 1, 2',
        `X-Big: ${'a'.repeat(17_000)}`, 'Origin: https://evil.example', 'Cookie: session=x', ':authority: x', 'Host: [::1'),
    );
    const request = fc.record({ line, headers: fc.array(header, { maxLength: 6 }), body: fc.oneof(fc.constant(''), fc.constantFrom('{}', '{"email":"a@example.com"}', '{', '[]')), withHost: fc.boolean() });
    await fc.assert(
      fc.asyncProperty(request, async ({ line: { method, target, version }, headers, body, withHost }) => {
        const head = [`${method} ${target} ${version}`.trimEnd(), ...(withHost ? ['Host: localhost'] : []), ...headers, `Content-Length: ${Buffer.byteLength(body)}`, 'Connection: close'];
        const bytes = `${head.join('\r\n')}\r\n\r\n${body}`;
        const answer = await exchangeWithin(port, bytes, 5000);
        const what = `${JSON.stringify(bytes.slice(0, 300))}\n→ ${JSON.stringify(answer.slice(0, 400))}`;
        const finals = [...answer.matchAll(/^HTTP\/1\.1 (\d{3}) /gm)].map((match) => Number(match[1])).filter((status) => status !== 100);
        // Node takes `PRI` in an HTTP/0.9 request line for HTTP/2's upgrade, and drops the connection (docs/api.md, Conventions).
        if (finals.length === 0 && method === 'PRI' && version === '') return;
        assert.ok(finals.length >= 1, `no answer: ${what}`);
        const status = finals.at(-1)!;
        assert.ok(status < 500, `a 5xx: ${what}`);
        // The MCP transport's own errors are JSON-RPC, the live view's are HTML pages (as documented).
        if (status < 400 || target.endsWith('/mcp') || target.startsWith('/live/')) return;
        assert.match(answer, /\r\ncontent-type: application\/problem\+json/i, `a 4xx that is not problem+json: ${what}`);
        if (method === 'HEAD') return;
        const problem = JSON.parse(Buffer.from(answer.slice(answer.lastIndexOf('\r\n\r\n') + 4), 'latin1').toString('utf8'));
        assert.deepEqual(Object.keys(problem).sort(), ['code', 'detail', 'status', 'title', 'type'], what);
        assert.equal(problem.status, status, what);
      }),
      { numRuns: Math.max(100, RUNS_PER_OPERATION * 4), ...(SEED === undefined ? {} : { seed: SEED }) },
    );
  });
});

/** Writes bytes on a new connection and reads until the server closes it; a server that keeps it longer than `timeoutMs` fails the test. */
function exchangeWithin(port: number, bytes: string, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the connection was kept open: ${JSON.stringify(bytes.slice(0, 200))} → ${JSON.stringify(received.slice(0, 200))}`));
    }, timeoutMs);
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(received);
    });
    socket.write(bytes);
  });
}
