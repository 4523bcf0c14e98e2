import { strict as assert } from 'node:assert';
import { before, describe, test } from 'node:test';
import { asBearer, asSession } from '../support/app.ts';
import { createMachine, machineSuite } from '../support/machines.ts';
import { assertProblem } from '../support/problem.ts';

const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'origin-test', version: '1.0.0' } },
};
const MCP_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

describe('MCP transport security: a foreign Origin is refused on both MCP endpoints, whatever the credential', () => {
  const suite = machineSuite();
  let machineId: string;
  let credentials: Record<string, Record<string, string>>;
  before(async () => {
    const machine = await createMachine(suite.owner);
    machineId = machine.id;
    credentials = {
      none: {},
      'an unknown bearer token': asBearer('tmk_unknown'),
      'the API key': asBearer(suite.owner.key),
      'the machine token': asBearer(machine.mcpToken),
      'the session cookie': { cookie: asSession(suite.owner.user.session).cookie! },
    };
  });

  const endpoints = () => ['/api/mcp', `/api/machines/${machineId}/mcp`];

  test('403 cross_site for every method, endpoint and credential, before authentication', async () => {
    // Regression: both endpoints answered a request from any Origin (CONTRACT 14, MCP transport security).
    for (const url of endpoints()) {
      for (const method of ['POST', 'GET', 'DELETE'] as const) {
        for (const [name, headers] of Object.entries(credentials)) {
          for (const origin of ['https://evil.example', 'http://localhost:3001', 'null', 'http://localhost:3000.evil.example']) {
            const response = await suite.ctx.app.inject({
              method,
              url,
              headers: { ...MCP_HEADERS, ...headers, origin },
              ...(method === 'POST' ? { payload: INITIALIZE } : {}),
            });
            assertProblem(response, 403, 'cross_site');
            assert.match(response.json().detail, /^MCP requests from another origin/, `${method} ${url} with ${name} from ${origin}`);
          }
        }
      }
    }
  });

  test('our own origin, or none at all, is served as before', async () => {
    for (const url of endpoints()) {
      for (const origin of [suite.ctx.config.publicUrl, undefined]) {
        const response = await suite.ctx.app.inject({
          method: 'POST',
          url,
          headers: { ...MCP_HEADERS, ...asBearer(suite.owner.key), ...(origin === undefined ? {} : { origin }) },
          payload: INITIALIZE,
        });
        assert.equal(response.statusCode, 200, `${url} from ${origin}: ${response.body}`);
        assert.equal(response.json().result.serverInfo.version, '1.0.0');
      }
    }
  });

  test('other routes are not subject to it: a Bearer request from another origin still works there', async () => {
    const response = await suite.ctx.app.inject({ method: 'GET', url: '/api/machines', headers: { ...asBearer(suite.owner.key), origin: 'https://evil.example' } });
    assert.equal(response.statusCode, 200);
  });
});
