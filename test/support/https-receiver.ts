import { startReceiver } from './receiver.ts';

export interface ReceivedDelivery {
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export interface HttpsReceiver {
  /** `https://127.0.0.1:<port>` */
  origin: string;
  received: ReceivedDelivery[];
  /** The status every request gets from now on. */
  answer: number;
  close(): Promise<void>;
}

/**
 * The shared test receiver (its certificate signed by the test CA that NODE_EXTRA_CA_CERTS
 * trusts), seen the way the dashboard tests and the screenshot script use it.
 */
export async function startHttpsReceiver(): Promise<HttpsReceiver> {
  let answer = 200;
  const receiver = await startReceiver(() => ({ status: answer, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ received: answer < 300 }) }));
  return {
    origin: `https://127.0.0.1:${receiver.port}`,
    get received() {
      return receiver.requests.map((request) => ({ path: request.path, headers: request.headers, body: request.body }));
    },
    get answer() {
      return answer;
    },
    set answer(status: number) {
      answer = status;
    },
    close: () => receiver.close(),
  };
}
