import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';
import { machineSuite, newOwner, runningMachine } from '../support/machines.ts';
import { assertProblem } from '../support/problem.ts';

/** Files and processes (CONTRACT 15) are the Docker provider's; the simulated one says so, and bad input is refused before any machine is asked. */
describe('files and processes where the provider has none', () => {
  const suite = machineSuite();

  test('409 not_supported, naming the provider to use; 404 for another account\'s machine; 400 for a relative path or a bad process id', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'pretend' });
    for (const [method, url, payload] of [
      ['GET', `/api/machines/${machine.id}/files?path=/root`, undefined],
      ['DELETE', `/api/machines/${machine.id}/files?path=/root/x`, undefined],
      ['POST', `/api/machines/${machine.id}/processes`, { command: 'sleep 1' }],
      ['GET', `/api/machines/${machine.id}/processes`, undefined],
    ] as const) {
      const response = await suite.owner.call(method, url, payload);
      assertProblem(response, 409, 'not_supported');
      assert.match(response.json().detail, /MACHINE_PROVIDER=docker/);
    }
    const upload = await suite.ctx.app.inject({ method: 'PUT', url: `/api/machines/${machine.id}/files?path=/root/x`, headers: { authorization: `Bearer ${suite.owner.key}`, 'content-type': 'text/plain' }, payload: 'x' });
    assertProblem(upload, 409, 'not_supported');
    const stranger = await newOwner(suite.ctx);
    assertProblem(await stranger.call('GET', `/api/machines/${machine.id}/files?path=/root`), 404, 'not_found');
    assertProblem(await suite.owner.call('GET', `/api/machines/${machine.id}/files?path=root`), 400, 'invalid_request');
    assertProblem(await suite.owner.call('GET', `/api/machines/${machine.id}/files`), 400, 'invalid_request');
    assertProblem(await suite.owner.call('GET', `/api/machines/${machine.id}/processes/proc_../output`), 400, 'invalid_request');
    assertProblem(await suite.owner.call('POST', `/api/machines/${machine.id}/processes`, { command: 'x', env: { 'BAD-NAME': 'v' } }), 400, 'invalid_request');
  });
});
