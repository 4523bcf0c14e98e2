import { StringDecoder } from 'node:string_decoder';
import { Agent, type Dispatcher } from 'undici';
import type { WebhookConfig } from '../config.ts';
import { abortMessage, failedBeforeSending, storable, type AttemptResult, type Sender } from './attempt.ts';
import { ALLOW_PRIVATE_TARGETS_HINT, checkHostLiteral, checkedLookup, createDnsResolver, RefusedTargetError, uncheckedLookup, type ResolveAll } from './targets.ts';

// Where the attempt's types live apart from undici, which only this module loads (see attempt.ts).
export { abortMessage, failedBeforeSending, type AttemptResult, type Sender } from './attempt.ts';

export const RESPONSE_BODY_LIMIT = 1024;
const PARSED_URLS_KEPT = 10_000;

const USER_AGENT = 'MachinePlatform-Webhooks/1.0';

/**
 * One HTTP attempt: success is a 2xx status within the timeout; redirects are
 * not followed; at most 1,024 bytes of the answer are read. Unless private
 * targets are allowed, every address is checked and the socket connects to
 * the checked one.
 */
export function createSender(config: Pick<WebhookConfig, 'timeoutMs' | 'allowPrivateTargets'>, givenResolveAll?: ResolveAll): Sender {
  // Half the attempt's time at most for the name: the connection and the answer need the rest.
  const dns = givenResolveAll === undefined ? createDnsResolver({ timeoutMs: Math.ceil(config.timeoutMs / 2) }) : null;
  const resolveAll = givenResolveAll ?? dns!.resolveAll;
  const agent = new Agent({
    // No cap per origin: the worker's lanes bound each endpoint's attempts, and
    // endpoints sharing a host must not share (and exhaust) one pool of connections.
    connections: null,
    allowH2: false,
    pipelining: 1,
    keepAliveTimeout: 30_000,
    headersTimeout: config.timeoutMs,
    bodyTimeout: config.timeoutMs,
    connect: { timeout: config.timeoutMs, lookup: config.allowPrivateTargets ? uncheckedLookup(resolveAll) : checkedLookup(resolveAll) },
  });

  // Endpoints send to the same few URLs over and over; parsing each once is enough.
  const targets = new Map<string, { origin: string; path: string; hostname: string }>();
  const targetOf = (url: string) => {
    let target = targets.get(url);
    if (target === undefined) {
      const parsed = new URL(url);
      target = { origin: parsed.origin, path: `${parsed.pathname}${parsed.search}`, hostname: parsed.hostname };
      if (targets.size >= PARSED_URLS_KEPT) targets.clear();
      targets.set(url, target);
    }
    return target;
  };

  function send(url: string, headers: Record<string, string>, body: string, signal?: AbortSignal): Promise<AttemptResult> {
    return new Promise((resolve) => {
      let target;
      try {
        target = targetOf(url);
        if (!config.allowPrivateTargets) checkHostLiteral(target.hostname);
      } catch (error) {
        return resolve(failedBeforeSending(describeFailure(error)));
      }
      if (signal?.aborted) return resolve(failedBeforeSending(`stopped: ${abortMessage(signal)} (${NOTHING_SENT})`));
      const attempt = new Attempt(config.timeoutMs, resolve, signal);
      agent.dispatch({ origin: target.origin, path: target.path, method: 'POST', headers: { ...headers, 'user-agent': USER_AGENT }, body }, attempt);
    });
  }

  return {
    send,
    close: async () => {
      dns?.close();
      await agent.close();
    },
  };
}

/**
 * How far an attempt without an answer got, said in its error wherever the
 * failure itself does not say it (a refused connection or an unknown host
 * does): a receiver that never saw an attempt finds it in the log and must be
 * able to tell why. "Sent" means written to a connection the receiver
 * accepted (undici writes a request as soon as it has one); whether the
 * receiver read it, only the receiver knows.
 */
const NOTHING_SENT = 'nothing was sent';
const SENT = 'the request was sent';

/**
 * One attempt, as an undici dispatch handler: the status decides the outcome;
 * at most `RESPONSE_BODY_LIMIT` bytes of the answer are kept, and reading
 * stops there (dropping the connection). One deadline covers connecting,
 * sending and the answer; a body cut short by it keeps what arrived (its
 * status already decided). A character split by the limit is left out rather
 * than garbled. A handler, not `request()` and a stream: this runs for every
 * attempt, and the stream, the abort signal and their listeners cost as much
 * as the rest of the attempt's JavaScript.
 */
class Attempt implements Dispatcher.DispatchHandler {
  readonly #started = performance.now();
  readonly #timeoutMs: number;
  readonly #resolve: (result: AttemptResult) => void;
  readonly #timer: NodeJS.Timeout;
  readonly #signal: AbortSignal | undefined;
  #controller: Dispatcher.DispatchController | null = null;
  #status: number | null = null;
  #chunks: Buffer[] = [];
  #length = 0;
  #timedOut = false;
  #done = false;

  constructor(timeoutMs: number, resolve: (result: AttemptResult) => void, signal: AbortSignal | undefined) {
    this.#timeoutMs = timeoutMs;
    this.#resolve = resolve;
    this.#timer = setTimeout(() => this.#onTimeout(), timeoutMs);
    this.#signal = signal;
    signal?.addEventListener('abort', this.#onAbort, { once: true });
  }

  /** Called once a connection is the request's, just before it is written. */
  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    // Its time ran out (or it was stopped) while it waited for a connection: it is not sent at all.
    if (this.#done) controller.abort(new Error('too late'));
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number): void {
    this.#status = statusCode;
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.#done) return;
    this.#chunks.push(chunk);
    this.#length += chunk.length;
    if (this.#length >= RESPONSE_BODY_LIMIT) {
      this.#finish(null, true);
      controller.abort(new Error('the answer is longer than we keep'));
    }
  }

  onResponseEnd(): void {
    this.#finish(null, false);
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.#finish(error, true);
  }

  #onTimeout(): void {
    this.#timedOut = true;
    this.#finish(null, true);
    this.#controller?.abort(new Error('timed out'));
  }

  readonly #onAbort = (): void => {
    const reason = new Error(`stopped: ${abortMessage(this.#signal!)}`);
    this.#finish(reason, true);
    this.#controller?.abort(reason);
  };

  /** Why no answer came, and how far the attempt got. */
  #noAnswer(error: Error | null): string {
    const connected = this.#controller !== null;
    if (this.#timedOut) return connected ? `no response within ${this.#timeoutMs} ms (${SENT})` : `no connection within ${this.#timeoutMs} ms (${NOTHING_SENT})`;
    const why = describeFailure(error);
    if (connected) return `${why} (${SENT})`;
    // A failure to connect names its step (refused, unknown host, TLS); a stop does not.
    return this.#signal?.aborted ? `${why} (${NOTHING_SENT})` : why;
  }

  #finish(error: Error | null, cut: boolean): void {
    if (this.#done) return;
    this.#done = true;
    clearTimeout(this.#timer);
    this.#signal?.removeEventListener('abort', this.#onAbort);
    const durationMs = Math.round(performance.now() - this.#started);
    const status = this.#status;
    if (status === null) return this.#resolve({ ok: false, status: null, body: null, error: storable(this.#noAnswer(error)), durationMs });
    const bytes = this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks);
    const text = storable(cut ? new StringDecoder('utf8').write(bytes.subarray(0, RESPONSE_BODY_LIMIT)) : bytes.toString('utf8'));
    this.#chunks = [];
    if (status >= 200 && status < 300) return this.#resolve({ ok: true, status, body: text, error: null, durationMs });
    const why = status >= 300 && status < 400 ? `redirect (${status}) not followed` : `receiver answered ${status}`;
    this.#resolve({ ok: false, status, body: text, error: why, durationMs });
  }
}

const FAILURE_BY_CODE: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset by the receiver',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'DNS lookup failed',
  ETIMEOUT: 'DNS lookup timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  UND_ERR_CONNECT_TIMEOUT: 'connection timed out',
  UND_ERR_HEADERS_TIMEOUT: 'no response headers within the timeout',
  UND_ERR_SOCKET: 'connection closed by the receiver',
  UND_ERR_CLOSED: 'connection closed',
};

/** OpenSSL's codes for a certificate chain that leads to no CA in Node's trust store. */
const UNTRUSTED_CERTIFICATE = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'CERT_UNTRUSTED',
]);

function describeFailure(error: unknown): string {
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause : error;
  for (const candidate of [error, cause]) {
    if (candidate instanceof RefusedTargetError) return `refused target: ${candidate.message}; ${ALLOW_PRIVATE_TARGETS_HINT}`;
  }
  const code = (error as { code?: string }).code ?? (cause as { code?: string }).code;
  if (code !== undefined && FAILURE_BY_CODE[code]) return FAILURE_BY_CODE[code];
  // Node adds "…; if the root CA is installed locally, try running Node.js with --use-system-ca": advice for
  // whoever runs the service, in words that do not say which setting of ours, or which file, it is about.
  const message = (error instanceof Error ? error.message : String(error)).replace(/;\s*if the root CA is installed locally.*$/s, '');
  if (code !== undefined && UNTRUSTED_CERTIFICATE.has(code)) {
    return `TLS error: the receiver's certificate is not trusted (${message}); for a private CA or a self-signed certificate, start the service with NODE_EXTRA_CA_CERTS=<that CA's or certificate's PEM file>`;
  }
  if (code !== undefined && /CERT|TLS|SSL/i.test(code)) return `TLS error: ${message}`;
  return message;
}
