import { strict as assert } from 'node:assert';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { perTurn } from '../../src/shared/worker-thread.ts';

/**
 * Loads `module` in a new thread, as its entry would be, and answers how many
 * of Node's type-stripper modules that thread loaded: each thread that loads
 * a .ts file pays about 12 MB for it (bench/RESULTS.md).
 */
async function strippersLoadedBy(module: URL, workerData: unknown): Promise<{ strippers: number; worker: Worker }> {
  const worker = new Worker(`
    const { parentPort } = require('node:worker_threads');
    import(${JSON.stringify(module.href)}).then(() =>
      parentPort.postMessage(process.moduleLoadList.filter((name) => name.includes('amaro')).length));
  `, { eval: true, workerData });
  const [strippers] = (await once(worker, 'message')) as [number];
  return { strippers, worker };
}

describe('worker threads', () => {
  test('the SQLite checkpoint thread loads no type stripper; a thread on a .ts module does (what the check sees)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'checkpoint-thread-'));
    try {
      const checkpointer = await strippersLoadedBy(new URL('../../src/db/sqlite-checkpoint.worker.js', import.meta.url), { path: join(dir, 'x.db'), intervalMs: 60_000 });
      const exited = once(checkpointer.worker, 'exit');
      checkpointer.worker.postMessage('stop');
      await exited;
      assert.equal(checkpointer.strippers, 0);

      const typed = await strippersLoadedBy(new URL('./fixtures/typed-helper.ts', import.meta.url), {});
      await typed.worker.terminate();
      assert.equal(typed.strippers, 1);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('perTurn: what one turn of the event loop adds goes as one batch; flush sends at once', async () => {
    const sent: number[][] = [];
    const batches = perTurn<number>((items) => sent.push(items));
    batches.add(1);
    batches.add(2);
    assert.deepEqual(sent, [], 'not before the turn ends');
    await new Promise((resolve) => setImmediate(resolve));
    batches.add(3);
    batches.flush();
    batches.flush();
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(sent, [[1, 2], [3]], 'an empty flush sends nothing');
  });
});
