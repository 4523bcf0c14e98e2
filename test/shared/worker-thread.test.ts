import { strict as assert } from 'node:assert';
import { once } from 'node:events';
import { describe, test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { perTurn, startWorkerThread } from '../../src/shared/worker-thread.ts';

/**
 * A thread on the service's TypeScript gets its modules already stripped,
 * so it never loads Node's type stripper (its memory is the point: about
 * 12 MB per thread, bench/RESULTS.md); a module the scan misses still runs.
 */
describe('startWorkerThread', () => {
  // Listened for before the message: a thread that answers and ends at once can have both events in one turn, and
  // 'exit' awaited only after 'message' would then never come (it hung CI for 86 minutes, 3 runs in 200 under load).
  const exitOf = (worker: Worker) => once(worker, 'exit').then(([code]) => code as number);

  test('runs a TypeScript module and what it imports, with its workerData and messages, without loading the stripper', async () => {
    const worker = startWorkerThread(new URL('./fixtures/typed.worker.ts', import.meta.url), { workerData: { n: 21 } });
    worker.postMessage('the first message is the module\'s own');
    const exited = exitOf(worker);
    const [report] = (await once(worker, 'message')) as [{ doubled: unknown; beforeLate: number; greeting: string; afterLate: number; first: string }];
    assert.equal(await exited, 0);
    assert.deepEqual(report.doubled, { value: 42 });
    assert.equal(report.first, 'the first message is the module\'s own');
    assert.equal(report.beforeLate, 0, 'the modules handed over needed no stripper');
    assert.equal(report.greeting, 'hello from a module stripped by the thread itself');
    assert.equal(report.afterLate, 1, 'a module the scan missed is stripped there, as usual');
  });

  test('a plain Worker on the same module loads the stripper (what the hand-over saves)', async () => {
    const worker = new Worker(new URL('./fixtures/typed.worker.ts', import.meta.url), { workerData: { n: 1 } });
    worker.postMessage('x');
    const exited = exitOf(worker);
    const [report] = (await once(worker, 'message')) as [{ beforeLate: number }];
    assert.equal(await exited, 0);
    assert.equal(report.beforeLate, 1);
  });

  test('a module that is not there fails at once, in the caller', () => {
    assert.throws(() => startWorkerThread(new URL('./fixtures/missing.worker.ts', import.meta.url)), (error: Error & { code?: string }) => error.code === 'ENOENT');
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
