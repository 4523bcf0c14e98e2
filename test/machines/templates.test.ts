import { strict as assert } from 'node:assert';
import { before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { MachineTemplates } from '../../src/providers/provider.ts';
import { eventCursor, finishBoot, listeningMachineSuite, newOwner, runningMachine, workerPass, type Owner } from '../support/machines.ts';

/**
 * CONTRACT 20 on the simulated provider (whose machines have no disk, so its
 * templates hold nothing and weigh 0 bytes): the template and fork API, its
 * limits and refusals (each changing nothing), another account's 404s, a
 * pool's template, and the platform MCP tools. The files themselves are
 * test/providers/docker-templates.test.ts's, on the real engine.
 */
describe('templates and forks (CONTRACT 20)', () => {
  const suite = listeningMachineSuite();
  let stranger: Owner;
  before(async () => {
    stranger = await newOwner(suite.ctx);
  });

  const templatesOf = async (who: Owner) => (await who.call('GET', '/api/templates?limit=100')).json().data as Array<{ id: string; name: string }>;
  const machineIdsOf = async (who: Owner) => ((await who.call('GET', '/api/machines?limit=100')).json().data as Array<{ id: string }>).map((m) => m.id).sort();
  const deleteAllTemplates = async (who: Owner) => {
    for (const template of await templatesOf(who)) assert.equal((await who.call('DELETE', `/api/templates/${template.id}`)).statusCode, 204);
  };

  test('a running machine saved as a template; machines from it by id or name carry its image and environment names', async () => {
    const source = await runningMachine(suite.ctx, suite.owner, { name: 'toolchain', env: { TOKEN: 'secret-value' } });
    const created = await suite.owner.call('POST', '/api/templates', { machineId: source.id, name: 'with-toolchain' });
    assert.equal(created.statusCode, 201, created.body);
    const template = created.json();
    assert.match(template.id, /^tpl_[0-9a-z]{26}$/);
    assert.deepEqual(Object.keys(template).sort(), ['createdAt', 'id', 'name', 'sizeBytes', 'sourceMachineId']);
    assert.equal(template.name, 'with-toolchain');
    assert.equal(template.sourceMachineId, source.id);
    assert.equal(template.sizeBytes, 0, 'a simulated machine has no disk');
    assert.deepEqual((await suite.owner.call('GET', `/api/templates/${template.id}`)).json(), template);
    assert.deepEqual(await templatesOf(suite.owner), [template]);
    assert.equal((await suite.owner.call('GET', `/api/machines/${source.id}`)).json().status, 'running', 'the source goes on');

    for (const ref of [template.id, template.name]) {
      const made = await suite.owner.call('POST', '/api/machines', { name: `from-${ref.slice(0, 8)}`, template: ref, env: { OTHER: 'x' } });
      assert.equal(made.statusCode, 201, made.body);
      assert.equal(made.json().template, template.id);
      assert.deepEqual(made.json().envNames, ['TOKEN', 'OTHER'], "the template's environment, then the machine's own");
      assert.doesNotMatch(made.body, /secret-value/);
      await finishBoot(suite.ctx);
      assert.equal((await suite.owner.call('GET', `/api/machines/${made.json().id}`)).json().status, 'running');
    }
    assert.equal((await suite.owner.call('GET', `/api/machines/${source.id}`)).json().template, null);
    await deleteAllTemplates(suite.owner);
  });

  test('a stopped or paused machine can be saved; a booting or destroyed one is 409 invalid_state, and nothing is stored', async () => {
    const stopped = await runningMachine(suite.ctx, suite.owner, { name: 'resting' });
    assert.equal((await suite.owner.call('POST', `/api/machines/${stopped.id}/stop`)).statusCode, 200);
    assert.equal((await suite.owner.call('POST', '/api/templates', { machineId: stopped.id, name: 'from-stopped' })).statusCode, 201);
    const paused = await runningMachine(suite.ctx, suite.owner, { name: 'frozen' });
    assert.equal((await suite.owner.call('POST', `/api/machines/${paused.id}/pause`)).statusCode, 200);
    assert.equal((await suite.owner.call('POST', '/api/templates', { machineId: paused.id, name: 'from-paused' })).statusCode, 201);
    assert.equal((await suite.owner.call('GET', `/api/machines/${paused.id}`)).json().status, 'paused', 'a paused machine stays paused');

    const booting = await suite.owner.call('POST', '/api/machines', { name: 'booting' });
    const refused = await suite.owner.call('POST', '/api/templates', { machineId: booting.json().id, name: 'from-booting' });
    assert.equal(refused.statusCode, 409);
    assert.equal(refused.json().code, 'invalid_state');
    await finishBoot(suite.ctx);
    assert.equal((await suite.owner.call('DELETE', `/api/machines/${booting.json().id}`)).statusCode, 200);
    const gone = await suite.owner.call('POST', '/api/templates', { machineId: booting.json().id, name: 'from-destroyed' });
    assert.equal(gone.statusCode, 409);
    assert.deepEqual((await templatesOf(suite.owner)).map((t) => t.name).sort(), ['from-paused', 'from-stopped']);
    await deleteAllTemplates(suite.owner);
  });

  test('bad input is a clear 4xx and stores nothing: blank or taken name, unknown fields, template with image or pool, unknown template', async () => {
    const source = await runningMachine(suite.ctx, suite.owner, { name: 'source' });
    const first = await suite.owner.call('POST', '/api/templates', { machineId: source.id, name: 'taken' });
    assert.equal(first.statusCode, 201);
    const cases: Array<[unknown, number, string]> = [
      [{ machineId: source.id, name: '  ' }, 400, 'invalid_request'],
      [{ machineId: source.id, name: 'x'.repeat(101) }, 400, 'invalid_request'],
      [{ machineId: source.id }, 400, 'invalid_request'],
      [{ machineId: source.id, name: 'extra', size: 'small' }, 400, 'invalid_request'],
      [{ machineId: source.id, name: 'taken' }, 409, 'conflict'],
      [{ machineId: 'mch_unknown', name: 'ghost' }, 404, 'not_found'],
    ];
    for (const [body, status, code] of cases) {
      const response = await suite.owner.call('POST', '/api/templates', body);
      assert.equal(response.statusCode, status, `${JSON.stringify(body)}: ${response.body}`);
      assert.equal(response.json().code, code);
    }
    assert.deepEqual((await templatesOf(suite.owner)).map((t) => t.name), ['taken']);

    const machinesBefore = await machineIdsOf(suite.owner);
    for (const [body, status] of [
      [{ name: 'a', template: 'taken', image: 'default' }, 400],
      [{ name: 'b', template: 'taken', pool: 'some-pool' }, 400],
      [{ name: 'c', template: 'no-such-template' }, 404],
    ] as const) {
      const response = await suite.owner.call('POST', '/api/machines', body);
      assert.equal(response.statusCode, status, `${JSON.stringify(body)}: ${response.body}`);
    }
    assert.deepEqual(await machineIdsOf(suite.owner), machinesBefore, 'no machine was made');
    await deleteAllTemplates(suite.owner);
  });

  test('another account’s machine or template is 404 everywhere, and nothing changes', async () => {
    const mine = await runningMachine(suite.ctx, suite.owner, { name: 'private' });
    const template = (await suite.owner.call('POST', '/api/templates', { machineId: mine.id, name: 'private-template' })).json();
    const strangerMachines = await machineIdsOf(stranger);
    const attempts: Array<[string, string, unknown]> = [
      ['POST', '/api/templates', { machineId: mine.id, name: 'stolen' }],
      ['GET', `/api/templates/${template.id}`, undefined],
      ['DELETE', `/api/templates/${template.id}`, undefined],
      ['POST', '/api/machines', { name: 'thief', template: template.id }],
      ['POST', '/api/machines', { name: 'thief', template: template.name }],
      ['POST', '/api/pools', { name: 'thieves', size: 'small', count: 1, template: template.id }],
      ['POST', `/api/machines/${mine.id}/fork`, { count: 2 }],
    ];
    for (const [method, url, body] of attempts) {
      const response = await stranger.call(method as 'POST', url, body);
      assert.equal(response.statusCode, 404, `${method} ${url}: ${response.body}`);
      assert.equal(response.json().code, 'not_found');
    }
    assert.deepEqual(await templatesOf(stranger), []);
    assert.deepEqual(await machineIdsOf(stranger), strangerMachines);
    assert.deepEqual((await stranger.call('GET', '/api/pools')).json().data, []);
    assert.equal((await suite.owner.call('GET', `/api/templates/${template.id}`)).statusCode, 200, 'still there for its owner');
    await deleteAllTemplates(suite.owner);
  });

  test('at most 20 templates per account: the 21st is 409 limit_reached and stores nothing; a deletion makes room', async () => {
    const source = await runningMachine(suite.ctx, suite.owner, { name: 'prolific' });
    for (let i = 1; i <= 20; i++) assert.equal((await suite.owner.call('POST', '/api/templates', { machineId: source.id, name: `t${i}` })).statusCode, 201);
    let saves = 0;
    const templates = suite.ctx.app.machineProvider.templates as MachineTemplates;
    const save = templates.save;
    templates.save = async (...args) => {
      saves++;
      return save.apply(templates, args);
    };
    try {
      const refused = await suite.owner.call('POST', '/api/templates', { machineId: source.id, name: 't21' });
      assert.equal(refused.statusCode, 409, refused.body);
      assert.equal(refused.json().code, 'limit_reached');
      assert.match(refused.json().detail, /20/);
      assert.equal(saves, 0, 'the host was not asked to copy anything');
    } finally {
      templates.save = save;
    }
    const all = await templatesOf(suite.owner);
    assert.equal(all.length, 20);
    assert.equal((await stranger.call('POST', '/api/templates', { machineId: (await runningMachine(suite.ctx, stranger, { name: 'other' })).id, name: 't1' })).statusCode, 201, 'the limit is per account');
    assert.equal((await suite.owner.call('DELETE', `/api/templates/${all[0]!.id}`)).statusCode, 204);
    assert.equal((await suite.owner.call('POST', '/api/templates', { machineId: source.id, name: 't21' })).statusCode, 201);
    await deleteAllTemplates(suite.owner);
    await deleteAllTemplates(stranger);
  });

  test('a template a pool makes its machines from cannot be deleted (409 template_in_use); its pool machines are from it', async () => {
    const source = await runningMachine(suite.ctx, suite.owner, { name: 'pool-source', env: { POOLED: '1' } });
    const template = (await suite.owner.call('POST', '/api/templates', { machineId: source.id, name: 'pooled' })).json();
    const pool = await suite.owner.call('POST', '/api/pools', { name: 'from-template', size: 'small', count: 1, template: template.name });
    assert.equal(pool.statusCode, 201, pool.body);
    assert.equal(pool.json().template, template.id);
    await finishBoot(suite.ctx);
    const claimed = await suite.owner.call('POST', '/api/machines', { name: 'claimed', pool: 'from-template' });
    assert.equal(claimed.statusCode, 201, claimed.body);
    assert.equal(claimed.json().template, template.id);
    assert.deepEqual(claimed.json().envNames, ['POOLED']);

    const refused = await suite.owner.call('DELETE', `/api/templates/${template.id}`);
    assert.equal(refused.statusCode, 409);
    assert.equal(refused.json().code, 'template_in_use');
    assert.match(refused.json().detail, /from-template/);
    assert.equal((await suite.owner.call('GET', `/api/templates/${template.id}`)).statusCode, 200, 'still there');
    assert.equal((await suite.owner.call('DELETE', `/api/pools/${pool.json().id}`)).statusCode, 204);
    assert.equal((await suite.owner.call('DELETE', `/api/templates/${template.id}`)).statusCode, 204);
    assert.equal((await suite.owner.call('GET', `/api/templates/${template.id}`)).statusCode, 404);
    assert.equal((await suite.owner.call('DELETE', `/api/templates/${template.id}`)).statusCode, 404);
    assert.equal((await suite.owner.call('GET', `/api/machines/${claimed.json().id}`)).json().status, 'running', 'machines made from it go on');
  });

  test('a fork makes count machines at once, each booting to running with machine.created; a count outside 1–10 is 400 and makes nothing', async () => {
    const source = await runningMachine(suite.ctx, suite.owner, { name: 'forked', labels: { team: 'a' }, env: { KEY: 'v' }, size: 'medium' });
    const fresh = eventCursor(suite.ctx, suite.owner);
    await fresh();
    const before = await machineIdsOf(suite.owner);
    for (const count of [0, 11, 1.5, -1]) {
      const refused = await suite.owner.call('POST', `/api/machines/${source.id}/fork`, { count });
      assert.equal(refused.statusCode, 400, `count ${count}: ${refused.body}`);
      assert.equal(refused.json().code, 'invalid_request');
    }
    assert.equal((await suite.owner.call('POST', `/api/machines/${source.id}/fork`, {})).statusCode, 400);
    assert.equal((await suite.owner.call('POST', `/api/machines/${source.id}/fork`, { count: 2, name: ' ' })).statusCode, 400);
    assert.deepEqual(await machineIdsOf(suite.owner), before, 'no machine was made');

    const forked = await suite.owner.call('POST', `/api/machines/${source.id}/fork`, { count: 3, name: 'copy' });
    assert.equal(forked.statusCode, 201, forked.body);
    const copies = forked.json().data as Array<{ id: string; name: string; status: string; size: string; labels: Record<string, string>; envNames: string[]; mcpToken: string }>;
    assert.deepEqual(copies.map((copy) => copy.name), ['copy-1', 'copy-2', 'copy-3']);
    for (const copy of copies) {
      assert.equal(copy.status, 'starting');
      assert.equal(copy.size, 'medium');
      assert.deepEqual(copy.labels, { team: 'a' });
      assert.deepEqual(copy.envNames, ['KEY']);
      assert.match(copy.mcpToken, /^tmm_/);
    }
    await finishBoot(suite.ctx);
    await workerPass(suite.ctx);
    for (const copy of copies) assert.equal((await suite.owner.call('GET', `/api/machines/${copy.id}`)).json().status, 'running');
    const created = (await fresh()).filter((event) => event.type === 'machine.created').map((event) => (event.data.machine as { id: string }).id);
    assert.deepEqual(created.sort(), copies.map((copy) => copy.id).sort());

    const one = await suite.owner.call('POST', `/api/machines/${source.id}/fork`, { count: 1 });
    assert.equal(one.statusCode, 201);
    assert.deepEqual(one.json().data.map((copy: { name: string }) => copy.name), ['forked-fork']);
    assert.equal((await suite.owner.call('POST', `/api/machines/${source.id}/stop`)).statusCode, 200);
    assert.equal((await suite.owner.call('POST', `/api/machines/${source.id}/fork`, { count: 1 })).statusCode, 201, 'a stopped machine forks too');
  });

  test('a host that fails the copy: 502 provider_error, and no template or machine is recorded', async () => {
    const source = await runningMachine(suite.ctx, suite.owner, { name: 'unlucky' });
    const templates = suite.ctx.app.machineProvider.templates as MachineTemplates;
    const { save, fork } = templates;
    templates.save = async () => {
      throw new Error('host unreachable (commit)');
    };
    templates.fork = async () => {
      throw new Error('host unreachable (commit)');
    };
    const machinesBefore = await machineIdsOf(suite.owner);
    try {
      const saved = await suite.owner.call('POST', '/api/templates', { machineId: source.id, name: 'never' });
      assert.equal(saved.statusCode, 502);
      assert.equal(saved.json().code, 'provider_error');
      const forked = await suite.owner.call('POST', `/api/machines/${source.id}/fork`, { count: 2 });
      assert.equal(forked.statusCode, 502);
      assert.equal(forked.json().code, 'provider_error');
    } finally {
      Object.assign(templates, { save, fork });
    }
    assert.deepEqual(await templatesOf(suite.owner), []);
    assert.deepEqual(await machineIdsOf(suite.owner), machinesBefore);
  });

  test('the platform MCP tools template_create and machine_fork answer what the HTTP API answers', async () => {
    const source = await runningMachine(suite.ctx, suite.owner, { name: 'tool-source' });
    const client = new Client({ name: 'templates-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL('/api/mcp', suite.base), { requestInit: { headers: { authorization: `Bearer ${suite.owner.key}` } } }));
    suite.clients.push(client);
    const names = (await client.listTools()).tools.map((tool) => tool.name);
    assert.ok(names.includes('template_create') && names.includes('machine_fork'), names.join(', '));

    const saved = (await client.callTool({ name: 'template_create', arguments: { machineId: source.id, name: 'by-tool' } })) as CallToolResult;
    assert.notEqual(saved.isError, true, JSON.stringify(saved));
    const template = saved.structuredContent as { id: string };
    assert.deepEqual(template, (await suite.owner.call('GET', `/api/templates/${template.id}`)).json());

    const forked = (await client.callTool({ name: 'machine_fork', arguments: { id: source.id, count: 2 } })) as CallToolResult;
    assert.notEqual(forked.isError, true, JSON.stringify(forked));
    const copies = (forked.structuredContent as { data: Array<{ id: string; mcpToken: string }> }).data;
    assert.equal(copies.length, 2);
    for (const copy of copies) {
      const { mcpToken, ...view } = copy;
      assert.match(mcpToken, /^tmm_/);
      assert.deepEqual(view, (await suite.owner.call('GET', `/api/machines/${copy.id}`)).json());
    }
    const before = await machineIdsOf(suite.owner);
    const refused = (await client.callTool({ name: 'machine_fork', arguments: { id: source.id, count: 11 } })) as CallToolResult;
    assert.equal(refused.isError, true);
    assert.deepEqual(await machineIdsOf(suite.owner), before);
    const stranger_ = (await client.callTool({ name: 'machine_fork', arguments: { id: 'mch_00000000000000000000000000', count: 1 } })) as CallToolResult;
    assert.equal((stranger_.structuredContent as { error: { code: string } }).error.code, 'not_found');
    await deleteAllTemplates(suite.owner);
  });

  test('the OpenAPI document describes the template routes and the fork with their errors', async () => {
    const doc = (await suite.ctx.app.inject({ method: 'GET', url: '/api/openapi.json' })).json();
    for (const [path, method, success] of [
      ['/api/templates', 'post', '201'],
      ['/api/templates', 'get', '200'],
      ['/api/templates/{id}', 'get', '200'],
      ['/api/templates/{id}', 'delete', '204'],
      ['/api/machines/{id}/fork', 'post', '201'],
    ] as const) {
      const operation = doc.paths[path]?.[method];
      assert.ok(operation, `${method} ${path}`);
      const codes = Object.keys(operation.responses);
      assert.ok(codes.includes(success) && codes.some((code) => /^4/.test(code)), `${method} ${path}: ${codes.join(', ')}`);
    }
    assert.match(JSON.stringify(doc.paths['/api/machines']?.post), /template/);
  });
});
