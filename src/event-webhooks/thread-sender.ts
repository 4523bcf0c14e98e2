import type { FastifyBaseLogger } from 'fastify';
import { Worker } from 'node:worker_threads';
import { perTurn } from '../shared/worker-thread.ts';
import type { WebhookConfig } from '../config.ts';
import { abortMessage, failedBeforeSending, type AttemptResult, type Sender } from './attempt.ts';

export type SenderThreadConfig = Pick<WebhookConfig, 'timeoutMs' | 'allowPrivateTargets'>;
/** One attempt handed to the thread: its number, then send()'s arguments. */
export type SendRequest = [id: number, url: string, headers: Record<string, string>, body: string];
/** What became of an attempt: its number and send()'s result. */
export type SendAnswer = [id: number, result: AttemptResult];
/** An attempt the service let go (its signal), and why. */
export type AbortRequest = { abort: number; reason: string };

export interface ThreadSenderOptions {
  /** Start the thread now, not with the first attempt (tests that time the thread's attempts alone). */
  startNow: boolean;
  /** The module the thread runs; tests give one that can be made to fail. */
  entry?: URL;
}

/**
 * WEBHOOK_SENDER_THREAD (a speed option): the same sender (sender.ts), run on
 * a worker thread of its own, so that HTTP (TLS, parsing the answers) does
 * not take turns with the jobs, the database and the API on the service's
 * thread. Attempts go over in batches, one message per turn of the event
 * loop, and come back the same way. The thread starts with the first
 * attempt (an idle thread holds memory most processes would never use); if it
 * ever stops, the attempts it held fail (and are retried on their schedule)
 * and the next attempt starts a new one.
 */
export function createThreadSender(config: SenderThreadConfig, logger: FastifyBaseLogger, { startNow, entry = new URL('./sender.worker.ts', import.meta.url) }: ThreadSenderOptions): Sender {
  let worker: Worker | null = null;
  let closed = false;
  let nextId = 0;
  const waiting = new Map<number, (result: AttemptResult) => void>();
  // Attempts started in one turn of the event loop go over in one message.
  const outbox = perTurn<SendRequest>((batch) => {
    if (closed) {
      for (const [id] of batch) settle(id, failedBeforeSending('the sender is closed'));
      return;
    }
    worker ??= start();
    worker.ref();
    worker.postMessage(batch);
  });

  function start(): Worker {
    const thread = new Worker(entry, {
      workerData: { timeoutMs: config.timeoutMs, allowPrivateTargets: config.allowPrivateTargets } satisfies SenderThreadConfig,
    });
    // Like a socket of the in-thread sender: it keeps the process alive only while an attempt is under way.
    thread.unref();
    thread.on('message', (answers: SendAnswer[]) => {
      for (const [id, result] of answers) settle(id, result);
    });
    thread.on('error', (err) => logger.error({ err }, 'the webhook sending thread failed'));
    thread.once('exit', (code) => {
      if (worker === thread) worker = null;
      if (!closed) logger.error({ code, attempts: waiting.size }, 'the webhook sending thread stopped; its attempts failed and are retried on their schedule');
      for (const id of [...waiting.keys()]) settle(id, failedBeforeSending('the sending thread stopped: whether the request was sent is not known'));
    });
    return thread;
  }

  function settle(id: number, result: AttemptResult): void {
    const resolve = waiting.get(id);
    if (resolve === undefined) return;
    waiting.delete(id);
    if (waiting.size === 0) worker?.unref();
    resolve(result);
  }

  if (startNow) worker = start();

  return {
    send(url, headers, body, signal) {
      return new Promise((resolve) => {
        const id = nextId++;
        waiting.set(id, resolve);
        outbox.add([id, url, headers, body]);
        signal?.addEventListener('abort', () => {
          // Still in this turn's batch, or already with the thread: it answers with how far the attempt got.
          if (waiting.has(id)) worker?.postMessage({ abort: id, reason: abortMessage(signal) } satisfies AbortRequest);
        }, { once: true });
      });
    },
    async close() {
      closed = true;
      const thread = worker;
      if (thread === null) return;
      const exited = new Promise<void>((resolve) => thread.once('exit', () => resolve()));
      thread.ref();
      thread.postMessage('close');
      // The thread ends once its attempts are answered, each within its timeout; past that, it is stopped.
      const deadline = setTimeout(() => void thread.terminate(), config.timeoutMs + 1000);
      await exited;
      clearTimeout(deadline);
    },
  };
}
