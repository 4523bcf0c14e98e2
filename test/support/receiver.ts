import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';

const tls = (name: string) => readFileSync(fileURLToPath(new URL(`./tls/${name}`, import.meta.url)));

export interface ReceivedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** performance.now() when the request was complete. */
  at: number;
}

/** What the receiver answers to the n-th request (from 1); `hang` never answers. */
export type Behaviour = (
  request: ReceivedRequest,
  n: number,
) =>
  | {
      status: number;
      body?: string;
      headers?: Record<string, string>;
      delayMs?: number;
      /** answer once this settles (a test's own moment) */
      after?: Promise<unknown>;
      /** send headers and this much body, then never finish */
      endless?: boolean;
    }
  | 'hang';

export interface Receiver {
  url: string;
  port: number;
  requests: ReceivedRequest[];
  behaviour: Behaviour;
  /** Resolves once `count` requests have arrived; rejects after `timeoutMs`. */
  waitFor(count: number, timeoutMs?: number): Promise<ReceivedRequest[]>;
  /** Requests being answered right now, by Service-Delivery id: to catch two attempts at once. */
  maxConcurrentPerDelivery: number;
  /** Requests received and not answered yet. */
  unanswered(): number;
  close(): Promise<void>;
}

/** A real HTTPS server on 127.0.0.1, its certificate signed by the test CA that NODE_EXTRA_CA_CERTS trusts. */
export async function startReceiver(behaviour: Behaviour = () => ({ status: 200, body: 'ok' }), host = '127.0.0.1'): Promise<Receiver> {
  const hanging = new Set<ServerResponse>();
  const active = new Map<string, number>();
  const waiters: Array<{ count: number; resolve: () => void }> = [];
  const server: Server = createServer({ key: tls('server.key'), cert: tls('server.pem') }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const request: ReceivedRequest = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: performance.now() };
      receiver.requests.push(request);
      const deliveryId = String(req.headers['service-delivery'] ?? '');
      const concurrent = (active.get(deliveryId) ?? 0) + 1;
      active.set(deliveryId, concurrent);
      receiver.maxConcurrentPerDelivery = Math.max(receiver.maxConcurrentPerDelivery, concurrent);
      const done = () => active.set(deliveryId, (active.get(deliveryId) ?? 1) - 1);
      res.on('close', done);
      for (const waiter of [...waiters]) {
        if (receiver.requests.length >= waiter.count) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve();
        }
      }
      const answer = receiver.behaviour(request, receiver.requests.length);
      if (answer === 'hang') {
        hanging.add(res);
        return;
      }
      const send = () => {
        res.writeHead(answer.status, answer.headers ?? {});
        if (!answer.endless) return void res.end(answer.body ?? '');
        res.write(answer.body ?? '');
        hanging.add(res);
      };
      if (answer.after) void answer.after.finally(send);
      else if (answer.delayMs) setTimeout(send, answer.delayMs);
      else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, () => resolve()));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('receiver has no port');
  const receiver: Receiver = {
    url: `https://${host}:${address.port}/hook`,
    port: address.port,
    requests: [],
    behaviour,
    maxConcurrentPerDelivery: 0,
    unanswered: () => [...active.values()].reduce((sum, count) => sum + count, 0),
    waitFor(count, timeoutMs = 10_000) {
      if (receiver.requests.length >= count) return Promise.resolve(receiver.requests.slice());
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`receiver got ${receiver.requests.length} requests, expected ${count}`)), timeoutMs);
        waiters.push({ count, resolve: () => { clearTimeout(timer); resolve(receiver.requests.slice()); } });
      });
    },
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return receiver;
}

/** Polls until `check` returns a value (not undefined), or fails after `timeoutMs`. */
export async function eventually<T>(check: () => Promise<T | undefined> | T | undefined, timeoutMs = 10_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The receivers one test file starts, closed together at its end. */
export function receiverPool() {
  const started: Receiver[] = [];
  return {
    start: async (...args: Parameters<typeof startReceiver>) => {
      const receiver = await startReceiver(...args);
      started.push(receiver);
      return receiver;
    },
    closeAll: () => Promise.all(started.map((receiver) => receiver.close())),
  };
}
