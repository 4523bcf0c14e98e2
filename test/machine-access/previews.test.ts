import { strict as assert } from 'node:assert';
import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { Duplex } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { asBearer, asSession } from '../support/app.ts';
import { createMachineTestApp, machineSuite, newOwner, runningMachine } from '../support/machines.ts';
import { assertProblem } from '../support/problem.ts';
import { hostOnlyCookie } from '../../src/machine-access/previews/preview-proxy.ts';
import { previewHosts, portOf } from '../../src/machine-access/previews/preview-access.ts';
import { loadConfig } from '../../src/config.ts';
import { PortClosed } from '../../src/providers/provider.ts';

const hostOf = (machineId: string, port: number) => `${port}-${machineId.replace('_', '-')}.localhost:3000`;

describe('preview hosts and addresses', () => {
  test('PREVIEW_URL: {port} and {id} in a host other than PUBLIC_URL’s; the default follows PORT', () => {
    assert.equal(loadConfig({ PORT: '4000' }).previewUrl, 'http://{port}-{id}.localhost:4000');
    assert.equal(loadConfig({ PREVIEW_URL: 'https://{port}-{id}.preview.example.com' }).previewUrl, 'https://{port}-{id}.preview.example.com');
    for (const bad of ['https://preview.example.com', 'https://{port}.preview.example.com', 'ftp://{port}-{id}.example.com', 'https://{port}-{id}.example.com/path', 'not a url']) {
      assert.throws(() => loadConfig({ PREVIEW_URL: bad }), /^ConfigError: PREVIEW_URL /, bad);
    }
  });

  test('PUBLIC_URL’s host may not have the shape of a preview host: the dashboard would be answered as one', async () => {
    await assert.rejects(createMachineTestApp({ env: { PUBLIC_URL: 'http://my-app.localhost:3000' } }), /^ConfigError: PREVIEW_URL must not match PUBLIC_URL's host my-app.localhost/);
  });

  test('a host names a port and a machine (mch- in hosts: `_` is no DNS host name character); ports 1–65535 only', () => {
    const hosts = previewHosts('https://{port}-{id}.preview.example.com');
    assert.deepEqual(hosts.parse('8080-mch-01jabcdefghjkmnpqrstvwxyz0.preview.example.com'), { port: '8080', machineId: 'mch_01jabcdefghjkmnpqrstvwxyz0' });
    assert.equal(hosts.parse('preview.example.com'), null);
    assert.equal(hosts.parse('8080-mch-x.example.com'), null);
    assert.equal(hosts.originOf('mch_01jabcdefghjkmnpqrstvwxyz0', 3000), 'https://3000-mch-01jabcdefghjkmnpqrstvwxyz0.preview.example.com');
    const reversed = previewHosts('http://{id}--{port}.localhost:3000');
    assert.deepEqual(reversed.parse('mch-01jabcdefghjkmnpqrstvwxyz0--81.localhost'), { port: '81', machineId: 'mch_01jabcdefghjkmnpqrstvwxyz0' });
    assert.deepEqual(['0', '1', '65535', '65536', '080', '8a', ''].map(portOf), [null, 1, 65_535, null, null, null, null]);
  });

  test('an app’s cookie loses its Domain: it stays on its preview host and never reaches the dashboard', () => {
    assert.equal(hostOnlyCookie('a=1; Domain=localhost; Path=/; HttpOnly'), 'a=1; Path=/; HttpOnly');
    assert.equal(hostOnlyCookie('a=1;domain=.example.com'), 'a=1');
    assert.equal(hostOnlyCookie('domain=1; Path=/'), 'domain=1; Path=/', 'a cookie named domain keeps its value');
  });
});

/** The simulated provider reaches no port; these tests lend it one: a real HTTP server on this host, standing for the machine's port. */
describe('previews (simulated machines, a local app behind the port)', () => {
  let base: AddressInfo;
  let appServer: Server;
  let appPort: number;
  const seen: IncomingHttpHeaders[] = [];
  const suite = machineSuite({
    setup: (app) => {
      // The machine's port `appPort` is the local app started below; any other port has nothing listening (as the
      // agent says it: a connection destroyed with PortClosed once the request went out).
      app.machineProvider.connectPort = async (_machine, port) => {
        if (port === appPort) return connect(appPort, '127.0.0.1');
        const refused = new Duplex({ read() {}, write: (_chunk, _encoding, done) => done() });
        setImmediate(() => refused.destroy(new PortClosed(port)));
        return refused;
      };
    },
  });

  before(async () => {
    appServer = createServer((request, response) => {
      seen.push(request.headers);
      if (request.url === '/echo') {
        response.writeHead(200, { 'content-type': 'application/octet-stream' });
        request.pipe(response);
        return;
      }
      response.writeHead(200, [
        'Content-Type', 'text/html; charset=utf-8',
        'Access-Control-Allow-Origin', 'https://app.example',
        'Access-Control-Allow-Credentials', 'true',
        'Access-Control-Expose-Headers', 'X-Custom',
        'X-Custom', 'kept',
        'Set-Cookie', 'app=1; Domain=localhost; Path=/',
      ]);
      response.end(`<h1>hello from ${request.url}</h1>`);
    });
    appServer.on('upgrade', (request, socket) => {
      socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n');
      socket.pipe(socket);
      seen.push(request.headers);
    });
    await new Promise<void>((resolve) => appServer.listen(0, '127.0.0.1', resolve));
    appPort = (appServer.address() as AddressInfo).port;
    await suite.ctx.app.listen({ port: 0, host: '127.0.0.1' });
    base = suite.ctx.app.server.address() as AddressInfo;
  });
  after(async () => {
    appServer.closeAllConnections();
    await new Promise((resolve) => appServer.close(resolve));
  });

  /** A request to a preview host, over the real server (Node resolves no *.localhost here: the Host header says it). */
  function previewGet(host: string, path = '/', headers: Record<string, string> = {}, method = 'GET', body?: Buffer): Promise<{ status: number; headers: IncomingHttpHeaders; rawHeaders: string[]; body: Buffer }> {
    return new Promise((resolve, reject) => {
      const request = httpRequest({ host: '127.0.0.1', port: base.port, method, path, headers: { host, ...headers } }, (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers, rawHeaders: response.rawHeaders, body: Buffer.concat(chunks) }));
      });
      request.on('error', reject);
      request.end(body);
    });
  }

  const injectPreview = (host: string, headers: Record<string, string> = {}, url = '/') => suite.ctx.app.inject({ method: 'GET', url, headers: { host, ...headers } });

  async function settingsOf(machineId: string) {
    const response = await suite.owner.call('GET', `/api/machines/${machineId}/previews`);
    assert.equal(response.statusCode, 200, response.body);
    return response.json() as { previewToken: string; urlTemplate: string; publicPorts: Array<{ port: number; url: string }> };
  }

  test('the owner sees the preview token and the URL; the port answers with it, the app’s headers arriving once and unchanged', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner);
    const settings = await settingsOf(machine.id);
    assert.match(settings.previewToken, /^tmp_[A-Za-z0-9_-]{43}$/);
    assert.equal(settings.urlTemplate, `http://{port}-${machine.id.replace('_', '-')}.localhost:3000`);
    assert.deepEqual(settings.publicPorts, []);

    const host = hostOf(machine.id, appPort);
    const refused = await previewGet(host, '/', { accept: 'application/json' });
    assert.equal(refused.status, 401);
    assert.equal(JSON.parse(refused.body.toString()).code, 'preview_private');

    const page = await previewGet(host, '/page?x=1', { 'x-preview-token': settings.previewToken, cookie: 'machine-preview=x; theirs=2', origin: 'https://app.example' });
    assert.equal(page.status, 200);
    assert.equal(page.body.toString(), '<h1>hello from /page?x=1</h1>');
    const names = page.rawHeaders.filter((_, index) => index % 2 === 0);
    for (const name of ['Access-Control-Allow-Origin', 'Access-Control-Allow-Credentials', 'Access-Control-Expose-Headers', 'X-Custom']) {
      assert.equal(names.filter((seenName) => seenName.toLowerCase() === name.toLowerCase()).length, 1, `${name} once`);
    }
    assert.equal(page.headers['access-control-allow-origin'], 'https://app.example');
    assert.equal(page.headers['access-control-expose-headers'], 'X-Custom');
    assert.deepEqual(page.headers['set-cookie'], ['app=1; Path=/'], 'the app’s cookie, host-only');
    assert.equal(page.headers['content-security-policy'], undefined, 'none of the service’s own headers');
    const forwarded = seen.at(-1)!;
    assert.equal(forwarded['x-preview-token'], undefined, 'the preview token never reaches the app');
    assert.equal(forwarded.cookie, 'theirs=2', 'nor the preview’s cookie; the app’s own do');
    assert.equal(forwarded.host, host);
    assert.equal(forwarded.origin, 'https://app.example');

    // A body streams both ways.
    const upload = Buffer.alloc(3 * 1024 * 1024, 7);
    const echoed = await previewGet(host, '/echo', { 'x-preview-token': settings.previewToken }, 'POST', upload);
    assert.equal(echoed.status, 200);
    assert.ok(echoed.body.equals(upload));
  });

  test('a preview host is never the API or the dashboard: a session cookie there opens nothing', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner);
    const host = hostOf(machine.id, appPort);
    for (const path of ['/api/me', '/', '/api/machines']) {
      const response = await previewGet(host, path, { ...asSession(suite.owner.user.session), accept: 'application/json' });
      assert.equal(response.status, 401, path);
      assert.equal(JSON.parse(response.body.toString()).code, 'preview_private');
      assert.equal(response.headers['set-cookie'], undefined);
    }
    const viaInject = await injectPreview(host, { ...asSession(suite.owner.user.session) }, '/api/me');
    assertProblem(viaInject, 401, 'preview_private');
  });

  test('bad input: a port outside 1–65535 or a malformed host is 400; an unknown machine or another account’s is 404', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner);
    const label = machine.id.replace('_', '-');
    assertProblem(await injectPreview(`0-${label}.localhost:3000`), 400, 'invalid_request');
    assertProblem(await injectPreview(`65536-${label}.localhost:3000`), 400, 'invalid_request');
    assertProblem(await injectPreview(`80-mch-nope.localhost:3000`), 400, 'invalid_request');
    assertProblem(await injectPreview(`80-mch-00000000000000000000000000.localhost:3000`), 404, 'not_found');
    const page = await injectPreview(`0-${label}.localhost:3000`, { accept: 'text/html,application/xhtml+xml' });
    assert.equal(page.statusCode, 400);
    assert.match(String(page.headers['content-type']), /^text\/html/);
    assert.match(page.body, /from 1 to 65535/);

    const other = await newOwner(suite.ctx);
    assertProblem(await other.call('GET', `/api/machines/${machine.id}/previews`), 404, 'not_found');
    assertProblem(await other.call('POST', `/api/machines/${machine.id}/previews`, { port: 80 }), 404, 'not_found');
    assertProblem(await other.call('PATCH', `/api/machines/${machine.id}/previews/80`, { public: true }), 404, 'not_found');
    for (const body of [{ port: 0 }, { port: 65_536 }, { port: 80, expiresInSeconds: 59 }, { port: 80, expiresInSeconds: 86_401 }, { port: '80' }, { port: 80, path: '/' }]) {
      assertProblem(await suite.owner.call('POST', `/api/machines/${machine.id}/previews`, body), 400, 'invalid_request');
    }
    assertProblem(await suite.owner.call('PATCH', `/api/machines/${machine.id}/previews/0`, { public: true }), 400, 'invalid_request');
    assertProblem(await suite.owner.call('PATCH', `/api/machines/${machine.id}/previews/70000`, { public: true }), 400, 'invalid_request');
    assertProblem(await suite.owner.call('PATCH', `/api/machines/${machine.id}/previews/80`, { public: 'yes' }), 400, 'invalid_request');
    assert.deepEqual((await settingsOf(machine.id)).publicPorts, [], 'nothing changed');
  });

  test('a signed link sets a host-only cookie and goes to the clean URL; it expires; forged or foreign links set nothing', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner);
    const created = await suite.owner.call('POST', `/api/machines/${machine.id}/previews`, { port: appPort, expiresInSeconds: 120 });
    assert.equal(created.statusCode, 201, created.body);
    const link = created.json() as { url: string; expiresAt: string };
    const url = new URL(link.url);
    assert.equal(url.host, hostOf(machine.id, appPort));
    assert.equal(link.expiresAt, new Date(Math.floor(suite.ctx.clock.now() / 1000) * 1000 + 120_000).toISOString());

    const opened = await previewGet(url.host, `${url.pathname}${url.search}&keep=1`);
    assert.equal(opened.status, 302);
    assert.equal(opened.headers.location, '/?keep=1');
    const setCookie = opened.headers['set-cookie']![0]!;
    assert.match(setCookie, /^machine-preview=[0-9]+\.[A-Za-z0-9_-]{43}; Path=\/; Max-Age=120; HttpOnly; SameSite=Lax$/);
    assert.doesNotMatch(setCookie, /domain/i, 'for that preview host only');
    const cookie = setCookie.split(';')[0]!;
    const page = await previewGet(url.host, '/?keep=1', { cookie });
    assert.equal(page.status, 200);

    // The cookie is for this port only, and for this machine only.
    const other = await runningMachine(suite.ctx, suite.owner);
    assertProblem(await injectPreview(hostOf(machine.id, appPort + 1), { cookie }), 401, 'preview_private');
    assertProblem(await injectPreview(hostOf(other.id, appPort), { cookie }), 401, 'preview_private');

    // Forged, for another port, for another machine: refused, nothing set.
    const value = url.searchParams.get('preview-link')!;
    const [expires, signature] = value.split('.');
    const forged = `${Number(expires) + 3600}.${signature}`;
    for (const [host, link] of [[url.host, forged], [url.host, `${expires}.${'A'.repeat(43)}`], [hostOf(machine.id, appPort + 1), value], [hostOf(other.id, appPort), value], [url.host, 'garbage']] as const) {
      const refused = await injectPreview(host, {}, `/?preview-link=${encodeURIComponent(link)}`);
      assertProblem(refused, 401, 'invalid_preview_link');
      assert.equal(refused.headers['set-cookie'], undefined);
    }

    // Past its expiry, neither the link nor its cookie opens anything.
    suite.ctx.clock.advance(Date.parse(link.expiresAt) - suite.ctx.clock.now() - 1);
    assert.equal((await previewGet(url.host, '/', { cookie })).status, 200);
    suite.ctx.clock.advance(1);
    const expired = await injectPreview(url.host, {}, `${url.pathname}${url.search}`);
    assertProblem(expired, 401, 'invalid_preview_link');
    assert.equal(expired.headers['set-cookie'], undefined);
    assertProblem(await injectPreview(url.host, { cookie }), 401, 'preview_private');
  });

  test('a new machine token voids the preview token, links and cookies', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner);
    const { previewToken } = await settingsOf(machine.id);
    const link = new URL((await suite.owner.call('POST', `/api/machines/${machine.id}/previews`, { port: appPort })).json().url);
    const cookie = String((await injectPreview(link.host, {}, `${link.pathname}${link.search}`)).headers['set-cookie']).split(';')[0]!;
    const rotated = await suite.owner.call('POST', `/api/machines/${machine.id}/mcp-token`);
    assert.ok(rotated.statusCode < 300, rotated.body);
    assert.notEqual((await settingsOf(machine.id)).previewToken, previewToken);
    assertProblem(await injectPreview(link.host, { 'x-preview-token': previewToken }), 401, 'preview_private');
    assertProblem(await injectPreview(link.host, { cookie }), 401, 'preview_private');
    assertProblem(await injectPreview(link.host, {}, `${link.pathname}${link.search}`), 401, 'invalid_preview_link');
  });

  test('a public port answers anyone until made private again', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner);
    const host = hostOf(machine.id, appPort);
    const made = await suite.owner.call('PATCH', `/api/machines/${machine.id}/previews/${appPort}`, { public: true });
    assert.equal(made.statusCode, 200, made.body);
    assert.deepEqual(made.json(), { port: appPort, public: true, url: `http://${host}` });
    assert.deepEqual((await settingsOf(machine.id)).publicPorts, [{ port: appPort, url: `http://${host}` }]);
    assert.equal((await previewGet(host)).status, 200);
    assertProblem(await injectPreview(hostOf(machine.id, appPort + 1)), 401, 'preview_private', undefined);
    await suite.owner.call('PATCH', `/api/machines/${machine.id}/previews/${appPort}`, { public: false });
    assert.equal((await previewGet(host)).status, 401);
  });

  test('a WebSocket (any upgrade) goes through, with the token; refused without one', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner);
    const { previewToken } = await settingsOf(machine.id);
    const host = hostOf(machine.id, appPort);
    const refused = await upgrade(host, {});
    assert.match(refused, /^HTTP\/1.1 401 /);
    const echoed = await upgrade(host, { 'x-preview-token': previewToken }, 'ping through the preview');
    assert.match(echoed, /^HTTP\/1.1 101 Switching Protocols\r\n/);
    assert.ok(echoed.endsWith('\r\n\r\nping through the preview'), echoed);
    assert.equal(seen.at(-1)!['x-preview-token'], undefined);
    assert.equal(seen.at(-1)!.upgrade, 'echo');
    // The head goes out with the connection's opening: a closed port is known only after, and still answered.
    const closed = await upgrade(hostOf(machine.id, 5999), { 'x-preview-token': previewToken, accept: 'application/json' });
    assert.match(closed, /^HTTP\/1.1 502 /);
    assert.match(closed, /Nothing listens on port 5999.*"code":"port_closed"/);
  });

  function upgrade(host: string, headers: Record<string, string>, send?: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = connect(base.port, '127.0.0.1');
      let text = '';
      socket.on('data', (chunk: Buffer) => {
        text += chunk.toString();
        if (send !== undefined && text.includes('\r\n\r\n') && !text.includes(send)) {
          if (!text.endsWith('\r\n\r\n')) return;
          socket.write(send);
        }
        if (send !== undefined && text.endsWith(send)) socket.end();
      });
      socket.on('end', () => resolve(text));
      socket.on('close', () => resolve(text));
      socket.on('error', reject);
      const lines = [`GET /ws HTTP/1.1`, `Host: ${host}`, 'Connection: Upgrade', 'Upgrade: echo', ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`)];
      socket.write(`${lines.join('\r\n')}\r\n\r\n`);
    });
  }

  test('a paused or stopped machine answers 503 (a page for browsers, problem+json for clients); a closed port 502 naming it', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner);
    const { previewToken } = await settingsOf(machine.id);
    const closed = await injectPreview(hostOf(machine.id, 5999), { 'x-preview-token': previewToken });
    assertProblem(closed, 502, 'port_closed');
    assert.match(closed.json().detail, /^Nothing listens on port 5999/);
    const closedPage = await injectPreview(hostOf(machine.id, 5999), { 'x-preview-token': previewToken, accept: 'text/html' });
    assert.equal(closedPage.statusCode, 502);
    assert.match(closedPage.body, /port 5999/);

    const host = hostOf(machine.id, appPort);
    assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/pause`)).statusCode, 200);
    const paused = await injectPreview(host, { 'x-preview-token': previewToken });
    assertProblem(paused, 503, 'machine_not_running');
    assert.match(paused.json().detail, /is paused.*Resume it/);
    assert.equal((await suite.owner.call('POST', `/api/machines/${machine.id}/resume`)).statusCode, 200);

    await suite.owner.call('POST', `/api/machines/${machine.id}/stop`);
    await suite.ctx.app.jobs.drain();
    assertProblem(await injectPreview(host, { 'x-preview-token': previewToken }), 503, 'machine_not_running');
    const page = await injectPreview(host, { 'x-preview-token': previewToken, accept: 'text/html' });
    assert.equal(page.statusCode, 503);
    assert.match(String(page.headers['content-type']), /^text\/html/);
    assert.match(page.body, /The machine is stopp(ing|ed)/);
    // Private still comes first: a stranger learns nothing of the machine's state.
    assertProblem(await injectPreview(host), 401, 'preview_private');
  });
});

describe('previews on the simulated provider as it is (no ports)', () => {
  const suite = machineSuite();

  test('a running machine’s preview says previews are not offered; the MCP tools are not offered either', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner);
    const { previewToken } = (await suite.owner.call('GET', `/api/machines/${machine.id}/previews`)).json();
    const response: LightMyRequestResponse = await suite.ctx.app.inject({ method: 'GET', url: '/', headers: { host: hostOf(machine.id, 8080), 'x-preview-token': previewToken } });
    assertProblem(response, 409, 'not_supported');
    const tools = await suite.ctx.app.inject({
      method: 'POST',
      url: `/api/machines/${machine.id}/mcp`,
      headers: { ...asBearer(machine.mcpToken), accept: 'application/json, text/event-stream', 'content-type': 'application/json' },
      payload: { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} },
    });
    assert.doesNotMatch(tools.body, /preview_url/);
  });
});
