import { strict as assert } from 'node:assert';
import { before, describe, test } from 'node:test';
import { generateToken } from '../../src/shared/secrets.ts';
import { asBearer } from '../support/app.ts';
import { machineSuite, newOwner, runningMachine, type CreatedMachine } from '../support/machines.ts';

const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'scope-test', version: '1.0.0' } },
};
const MCP_HEADERS = { accept: 'application/json, text/event-stream', 'content-type': 'application/json' };

describe('machine tokens (spec 5, rule 2)', () => {
  const suite = machineSuite();
  let mine: CreatedMachine;
  let sibling: CreatedMachine;
  let foreign: CreatedMachine;
  before(async () => {
    mine = await runningMachine(suite.ctx, suite.owner, { name: 'mine' });
    sibling = await runningMachine(suite.ctx, suite.owner, { name: 'sibling' });
    foreign = await runningMachine(suite.ctx, await newOwner(suite.ctx), { name: 'foreign' });
  });

  const send = (token: string | undefined, method: 'GET' | 'POST' | 'DELETE' | 'PATCH', url: string, payload?: unknown) =>
    suite.ctx.app.inject({
      method,
      url,
      headers: { ...(token === undefined ? {} : asBearer(token)), ...(url.endsWith('/mcp') ? MCP_HEADERS : {}) },
      ...(payload === undefined ? {} : { payload: payload as object }),
    });

  test("passes on its own machine's /mcp and /live-view", async () => {
    const mcp = await send(mine.mcpToken, 'POST', `/api/machines/${mine.id}/mcp`, INITIALIZE);
    assert.equal(mcp.statusCode, 200, mcp.body);
    assert.equal(mcp.json().result.serverInfo.name, 'machine mine');
    const live = await send(mine.mcpToken, 'POST', `/api/machines/${mine.id}/live-view`);
    assert.equal(live.statusCode, 201);
  });

  test('is 403 forbidden everywhere else, including the same endpoints of another machine', async () => {
    const elsewhere: Array<['GET' | 'POST' | 'DELETE' | 'PATCH', string, unknown?]> = [
      ['POST', `/api/machines/${sibling.id}/mcp`, INITIALIZE],
      ['POST', `/api/machines/${sibling.id}/live-view`],
      ['POST', `/api/machines/${foreign.id}/mcp`, INITIALIZE],
      ['POST', `/api/machines/${foreign.id}/live-view`],
      ['GET', '/api/machines'],
      ['POST', '/api/machines', { name: 'spawned' }],
      ['GET', `/api/machines/${mine.id}`],
      ['POST', `/api/machines/${mine.id}/stop`],
      ['POST', `/api/machines/${mine.id}/start`],
      ['DELETE', `/api/machines/${mine.id}`],
      ['POST', `/api/machines/${mine.id}/mcp-token`],
      ['POST', `/api/machines/${mine.id}/runs`, { command: 'ls' }],
      ['GET', `/api/machines/${mine.id}/runs`],
      ['GET', '/api/pools'],
      ['POST', '/api/schedules', { machineId: mine.id, name: 's', cron: '* * * * *', command: 'ls' }],
      ['POST', '/api/inbound-webhooks', { machineId: mine.id, name: 'h', command: 'ls' }],
      ['GET', '/api/event-webhooks'],
      ['POST', '/api/event-webhooks', { url: 'https://example.com/hook' }],
      ['GET', '/api/keys'],
      ['POST', '/api/keys', { name: 'escalate' }],
      ['GET', '/api/me'],
      ['POST', '/api/mcp', INITIALIZE],
    ];
    for (const [method, url, payload] of elsewhere) {
      const response = await send(mine.mcpToken, method, url, payload);
      assert.equal(response.statusCode, 403, `${method} ${url}`);
      assert.equal(response.json().code, 'forbidden', `${method} ${url}`);
    }
    assert.equal((await send(suite.owner.key, 'GET', `/api/machines/${mine.id}`)).json().status, 'running', 'nothing was stopped');
    const keys = await suite.ctx.app.inject({ method: 'GET', url: '/api/keys', headers: asBearer(suite.owner.key) });
    assert.equal(keys.json().data.length, 1, 'no key was created');
  });

  test('unknown, malformed, replaced and destroyed-machine tokens are 401 with WWW-Authenticate: Bearer', async () => {
    const unknown = generateToken('tmm_');
    const target = await runningMachine(suite.ctx, suite.owner, { name: 'short-lived' });
    const replaced = target.mcpToken;
    await send(suite.owner.key, 'POST', `/api/machines/${target.id}/mcp-token`);
    const doomed = await runningMachine(suite.ctx, suite.owner, { name: 'doomed' });
    await send(suite.owner.key, 'DELETE', `/api/machines/${doomed.id}`);
    const cases: Array<[string, string, string]> = [
      ['well-formed but never issued', unknown, mine.id],
      ['bad checksum', mine.mcpToken.slice(0, -1) + (mine.mcpToken.endsWith('A') ? 'B' : 'A'), mine.id],
      ['truncated', mine.mcpToken.slice(0, 20), mine.id],
      ['replaced', replaced, target.id],
      ['destroyed machine', doomed.mcpToken, doomed.id],
    ];
    for (const [label, token, id] of cases) {
      for (const path of ['mcp', 'live-view']) {
        const response = await send(token, 'POST', `/api/machines/${id}/${path}`, path === 'mcp' ? INITIALIZE : undefined);
        assert.equal(response.statusCode, 401, `${label} on ${path}`);
        assert.match(String(response.headers['www-authenticate']), /^Bearer/, label);
      }
    }
    const none = await send(undefined, 'POST', `/api/machines/${mine.id}/mcp`, INITIALIZE);
    assert.equal(none.statusCode, 401);
    assert.match(String(none.headers['www-authenticate']), /^Bearer/);
  });

  test("the owner's API key works on both endpoints; another account's key gets 404", async () => {
    assert.equal((await send(suite.owner.key, 'POST', `/api/machines/${mine.id}/mcp`, INITIALIZE)).statusCode, 200);
    assert.equal((await send(suite.owner.key, 'POST', `/api/machines/${mine.id}/live-view`)).statusCode, 201);
    const stranger = await newOwner(suite.ctx);
    assert.equal((await send(stranger.key, 'POST', `/api/machines/${mine.id}/mcp`, INITIALIZE)).statusCode, 404);
    assert.equal((await send(stranger.key, 'POST', `/api/machines/${mine.id}/live-view`)).statusCode, 404);
  });

  test('tokens are stored only as SHA-256 hashes', async () => {
    const rows = await suite.ctx.app.deps.db.selectFrom('machines').select('mcp_token_hash').where('id', '=', mine.id).execute();
    assert.match(rows[0]!.mcp_token_hash!, /^[0-9a-f]{64}$/);
    const dump = JSON.stringify(await suite.ctx.app.deps.db.selectFrom('machines').selectAll().execute());
    assert.ok(!dump.includes(mine.mcpToken));
  });
});
