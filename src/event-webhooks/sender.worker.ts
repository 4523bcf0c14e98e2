// Runs in a worker thread (thread-sender.ts starts it): the webhook HTTP attempts, on the same
// sender as in the service's own thread, with requests and answers passed in batches.
import { parentPort, workerData } from 'node:worker_threads';
import { perTurn } from '../shared/worker-thread.ts';
import { createSender, failedBeforeSending } from './sender.ts';
import type { AbortRequest, SendAnswer, SendRequest, SenderThreadConfig } from './thread-sender.ts';

const sender = createSender(workerData as SenderThreadConfig);
const port = parentPort!;
// Answers that arrive in one turn of the event loop go back in one message.
const answers = perTurn<SendAnswer>((batch) => port.postMessage(batch));

/** The attempts under way, each with the way to stop it should the service let it go. */
const underWay = new Map<number, AbortController>();

port.on('message', (message: SendRequest[] | AbortRequest | 'close') => {
  if (message === 'close') {
    // Once the attempts under way are answered (and their answers sent), nothing is left to keep the thread.
    void sender.close().finally(() => {
      answers.flush();
      port.close();
    });
    return;
  }
  if (!Array.isArray(message)) {
    underWay.get(message.abort)?.abort(new Error(message.reason));
    return;
  }
  for (const [id, url, headers, body] of message) {
    const controller = new AbortController();
    underWay.set(id, controller);
    // send() reports every failure as its result; were it ever to throw, that attempt fails alone, not the thread and all it holds.
    sender.send(url, headers, body, controller.signal).then(
      (result) => answers.add([id, result]),
      (error: unknown) => answers.add([id, failedBeforeSending(error instanceof Error ? error.message : String(error))]),
    ).finally(() => underWay.delete(id));
  }
});
