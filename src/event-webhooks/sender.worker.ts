// Runs in a worker thread (thread-sender.ts starts it): the webhook HTTP attempts, on the same
// sender as in the service's own thread, with requests and answers passed in batches.
import { parentPort, workerData } from 'node:worker_threads';
import { perTurn } from '../shared/worker-thread.ts';
import { createSender, failedBeforeSending } from './sender.ts';
import type { SendAnswer, SendRequest, SenderThreadConfig } from './thread-sender.ts';

const sender = createSender(workerData as SenderThreadConfig);
const port = parentPort!;
// Answers that arrive in one turn of the event loop go back in one message.
const answers = perTurn<SendAnswer>((batch) => port.postMessage(batch));

port.on('message', (message: SendRequest[] | 'close') => {
  if (message === 'close') {
    // Once the attempts under way are answered (and their answers sent), nothing is left to keep the thread.
    void sender.close().finally(() => {
      answers.flush();
      port.close();
    });
    return;
  }
  for (const [id, url, headers, body] of message) {
    // send() reports every failure as its result; were it ever to throw, that attempt fails alone, not the thread and all it holds.
    sender.send(url, headers, body).then(
      (result) => answers.add([id, result]),
      (error: unknown) => answers.add([id, failedBeforeSending(error instanceof Error ? error.message : String(error))]),
    );
  }
});
