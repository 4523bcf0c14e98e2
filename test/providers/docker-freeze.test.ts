import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import type Docker from 'dockerode';
import { pauseMachine } from '../../src/providers/docker/lifecycle.ts';

/** An engine whose container's pause fails `failures` times with `message` (HTTP 500), then freezes it. */
function engineFailingPause(failures: number, message: string) {
  let paused = false;
  let calls = 0;
  const container = {
    inspect: async () => ({ State: { Running: true, Paused: paused } }),
    pause: async () => {
      calls++;
      if (calls <= failures) throw Object.assign(new Error(`(HTTP code 500) server error - ${message}`), { statusCode: 500, json: { message } });
      paused = true;
    },
  };
  return { docker: { getContainer: () => container } as unknown as Docker, calls: () => calls, paused: () => paused };
}

test('a freeze runc missed (a process forking as it froze) is tried again, and succeeds', async () => {
  const engine = engineFailingPause(2, 'Cannot pause container x: OCI runtime pause failed: unable to freeze: unknown');
  await pauseMachine(engine.docker, 'mch_x');
  assert.deepEqual([engine.calls(), engine.paused()], [3, true]);
});

test('a freeze that keeps missing, or any other refusal, is the engine\'s error, not retried forever', async () => {
  const stuck = engineFailingPause(100, 'OCI runtime pause failed: unable to freeze: unknown');
  await assert.rejects(pauseMachine(stuck.docker, 'mch_x'), /unable to freeze/);
  assert.equal(stuck.calls(), 5);
  const refused = engineFailingPause(1, 'Container x is not running');
  await assert.rejects(pauseMachine(refused.docker, 'mch_x'), /not running/);
  assert.equal(refused.calls(), 1);
});

test('an already paused container is left as it is', async () => {
  const engine = engineFailingPause(0, '');
  await pauseMachine(engine.docker, 'mch_x');
  await pauseMachine(engine.docker, 'mch_x');
  assert.equal(engine.calls(), 1);
});
