import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { checkNetworkPolicy } from '../../src/providers/network-policy.ts';
import { egressChainRules } from '../../src/providers/docker/network.ts';
import { createMachineTestApp, machineSuite, newOwner } from '../support/machines.ts';
import { assertProblem } from '../support/problem.ts';

/**
 * A machine's network policy (issue 41, CONTRACT 20) at the API, on the
 * simulated provider: checked at create and by PATCH, kept, shown. That it
 * holds in real machines: docker-egress.test.ts.
 */
describe('a machine’s network policy', () => {
  const suite = machineSuite();

  const machineCount = async () => (await suite.ctx.app.deps.db.selectFrom('machines').select('id').execute()).length;
  const fiftyOne = Array.from({ length: 51 }, (_, i) => `203.0.113.${i}`);
  const badPolicies: Array<[string, unknown]> = [
    ['an entry that is neither a CIDR nor a domain', { internet: false, allow: ['not a domain'] }],
    ['a URL', { internet: false, allow: ['https://pypi.org/simple'] }],
    ['a name of one label', { internet: false, allow: ['localhost'] }],
    ['a wildcard in the middle', { internet: false, allow: ['files.*.org'] }],
    ['a domain in deny', { internet: true, deny: ['example.org'] }],
    ['a CIDR with bits past its prefix', { internet: true, deny: ['203.0.113.7/24'] }],
    ['an IPv6 range', { internet: false, allow: ['2001:db8::/32'] }],
    ['a prefix over 32', { internet: true, deny: ['203.0.113.0/33'] }],
    ['51 entries', { internet: false, allow: fiftyOne }],
    ['51 entries across allow and deny', { internet: false, allow: fiftyOne.slice(0, 26), deny: fiftyOne.slice(26) }],
    ['allow with the internet open', { internet: true, allow: ['pypi.org'] }],
    ['no internet', { allow: ['pypi.org'] }],
    ['an unknown field', { internet: true, proxy: 'x' }],
  ];

  test('a bad policy at create is a 400 naming it, and creates nothing', async () => {
    const before = await machineCount();
    for (const [what, network] of badPolicies) {
      const response = await suite.owner.call('POST', '/api/machines', { name: 'bad-network', network });
      assertProblem(response, 400, 'invalid_request');
      assert.ok(response.statusCode === 400, what);
    }
    assert.equal(await machineCount(), before);
  });

  test('a good one is kept normalised and shown; none given shows null (the operator’s default)', async () => {
    const created = await suite.owner.call('POST', '/api/machines', { name: 'net', network: { internet: false, allow: ['PyPI.org.', '*.pythonhosted.org', '203.0.113.9', '198.51.100.0/24', 'pypi.org'], deny: ['198.51.100.7/32'] } });
    assert.equal(created.statusCode, 201, created.body);
    const expected = { internet: false, allow: ['pypi.org', '*.pythonhosted.org', '203.0.113.9/32', '198.51.100.0/24'], deny: ['198.51.100.7/32'] };
    assert.deepEqual(created.json().network, expected);
    assert.deepEqual((await suite.owner.call('GET', `/api/machines/${created.json().id}`)).json().network, expected);
    const fifty = await suite.owner.call('POST', '/api/machines', { name: 'fifty', network: { internet: false, allow: fiftyOne.slice(0, 25), deny: fiftyOne.slice(25, 50) } });
    assert.equal(fifty.statusCode, 201, fifty.body);
    const plain = await suite.owner.call('POST', '/api/machines', { name: 'plain' });
    assert.equal(plain.json().network, null);
  });

  test('PATCH changes it; a bad one changes nothing; another account’s machine is a 404; a destroyed one a 409', async () => {
    const id = (await suite.owner.call('POST', '/api/machines', { name: 'patched', network: { internet: true, deny: ['203.0.113.0/24'] } })).json().id;
    const changed = await suite.owner.call('PATCH', `/api/machines/${id}`, { network: { internet: false, allow: ['*.pypi.org'] } });
    assert.equal(changed.statusCode, 200, changed.body);
    assert.deepEqual(changed.json().network, { internet: false, allow: ['*.pypi.org'], deny: [] });
    for (const [what, network] of badPolicies) {
      const response = await suite.owner.call('PATCH', `/api/machines/${id}`, { network });
      assert.equal(response.statusCode, 400, `${what}: ${response.body}`);
    }
    assertProblem(await suite.owner.call('PATCH', `/api/machines/${id}`, {}), 400, 'invalid_request');
    assert.deepEqual((await suite.owner.call('GET', `/api/machines/${id}`)).json().network, { internet: false, allow: ['*.pypi.org'], deny: [] });

    const stranger = await newOwner(suite.ctx);
    assertProblem(await stranger.call('PATCH', `/api/machines/${id}`, { network: { internet: true } }), 404, 'not_found');
    await suite.owner.call('DELETE', `/api/machines/${id}`);
    assertProblem(await suite.owner.call('PATCH', `/api/machines/${id}`, { network: { internet: true } }), 409, 'invalid_state');
  });

  test('a machine taken from a pool takes no policy at create', async () => {
    assertProblem(await suite.owner.call('POST', '/api/machines', { name: 'pooled', pool: 'nope', network: { internet: false } }), 400, 'invalid_request');
  });
});

describe('network policies where the operator gives machines no way out', () => {
  test('a policy that would open one is refused; internet false is taken', async () => {
    const ctx = await createMachineTestApp({ env: { MACHINE_EGRESS: 'off' } });
    try {
      const owner = await newOwner(ctx);
      assertProblem(await owner.call('POST', '/api/machines', { name: 'open', network: { internet: true } }), 400, 'invalid_request');
      assertProblem(await owner.call('POST', '/api/machines', { name: 'open', network: { internet: false, allow: ['pypi.org'] } }), 400, 'invalid_request');
      assert.equal((await owner.call('POST', '/api/machines', { name: 'shut', network: { internet: false } })).statusCode, 201);
    } finally {
      await ctx.close();
    }
  });
});

describe('MACHINE_PRIVATE_ALLOW', () => {
  test('takes IPv4 CIDRs and addresses; refuses anything else, naming the variable', () => {
    assert.deepEqual(loadConfig({ MACHINE_PRIVATE_ALLOW: ' 10.1.2.0/24, 172.17.0.5' }).machines.privateAllow, ['10.1.2.0/24', '172.17.0.5/32']);
    assert.deepEqual(loadConfig({}).machines.privateAllow, []);
    for (const value of ['10.1.2.3/24', 'db.internal', '::1/128', '10.0.0.0/40']) {
      assert.throws(() => loadConfig({ MACHINE_PRIVATE_ALLOW: value }), (error: Error) => error instanceof ConfigError && error.message.includes('MACHINE_PRIVATE_ALLOW'), value);
    }
  });

  test('its ranges go to the machine’s own policy before the refused ranges are dropped; nothing ever reaches another machine', () => {
    const rules = egressChainRules(['172.17.0.5/32']).split('\n');
    const index = (rule: string) => rules.indexOf(rule);
    assert.ok(index('-A MP-EGRESS -o mp-egress0 -j DROP') < index('-A MP-EGRESS -d 172.17.0.5/32 -j MP-MACHINES'));
    assert.ok(index('-A MP-EGRESS -d 172.17.0.5/32 -j MP-MACHINES') < index('-A MP-EGRESS -d 172.16.0.0/12 -j DROP'));
    assert.ok(index('-A MP-EGRESS -d 172.16.0.0/12 -j DROP') < index('-A MP-EGRESS -j MP-MACHINES'));
    assert.ok(index('-A MP-EGRESS -d 172.17.0.5/32 -j MP-MACHINES') > 0);
  });
});

test('checkNetworkPolicy takes what the MCP tools and the schemas send alike', () => {
  assert.deepEqual(checkNetworkPolicy({ internet: false, allow: ['*.Example.ORG'] }, true), { internet: false, allow: ['*.example.org'], deny: [] });
});
