import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { Agent } from 'undici';
import type { WebhookConfig } from '../config.ts';
import { checkHostLiteral, checkedLookup, RefusedTargetError, systemResolveAll, uncheckedLookup, type ResolveAll } from './targets.ts';

export const RESPONSE_BODY_LIMIT = 1024;
const PARSED_URLS_KEPT = 10_000;

export interface AttemptResult {
  ok: boolean;
  /** The receiver's HTTP status, or null when no response came. */
  status: number | null;
  /** At most the first 1,024 bytes of the response body. */
  body: string | null;
  error: string | null;
  durationMs: number;
}

export interface Sender {
  send(url: string, headers: Record<string, string>, body: string): Promise<AttemptResult>;
  close(): Promise<void>;
}

const USER_AGENT = 'MachinePlatform-Webhooks/1.0';

/**
 * One HTTP attempt: success is a 2xx status within the timeout; redirects are
 * not followed; at most 1,024 bytes of the answer are read. Unless private
 * targets are allowed, every address is checked and the socket connects to
 * the checked one.
 */
export function createSender(config: Pick<WebhookConfig, 'timeoutMs' | 'allowPrivateTargets'>, resolveAll: ResolveAll = systemResolveAll): Sender {
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

  async function send(url: string, headers: Record<string, string>, body: string): Promise<AttemptResult> {
    const started = performance.now();
    const result = (ok: boolean, status: number | null, text: string | null, error: string | null): AttemptResult => ({
      ok, status, body: storable(text), error: storable(error), durationMs: Math.round(performance.now() - started),
    });
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, config.timeoutMs);
    try {
      const target = targetOf(url);
      if (!config.allowPrivateTargets) checkHostLiteral(target.hostname);
      const response = await agent.request({
        origin: target.origin,
        path: target.path,
        method: 'POST',
        headers: { ...headers, 'user-agent': USER_AGENT },
        body,
        signal: controller.signal,
      });
      const status = response.statusCode;
      const text = await readAtMost(response.body, RESPONSE_BODY_LIMIT);
      if (status >= 200 && status < 300) return result(true, status, text, null);
      const error = status >= 300 && status < 400 ? `redirect (${status}) not followed` : `receiver answered ${status}`;
      return result(false, status, text, error);
    } catch (error) {
      return result(false, null, null, timedOut ? `no response within ${config.timeoutMs} ms` : describeFailure(error));
    } finally {
      clearTimeout(timer);
    }
  }

  return { send, close: () => agent.close() };
}

/** Receivers answer anything; PostgreSQL text refuses NUL, and one such answer must not sink the batch it is recorded with. */
function storable(text: string | null): string | null {
  return text === null ? null : text.replaceAll('\u0000', '\uFFFD');
}

/**
 * Reads the body up to `limit` bytes, then drops the rest (and with it the
 * connection). A body cut short by the deadline keeps what arrived (the status
 * already decided the outcome); a character split by the limit is left out
 * rather than garbled. Events, not an async iterator: this runs for every attempt.
 */
function readAtMost(body: Readable, limit: number): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let length = 0;
    let done = false;
    const finish = (cut: boolean) => {
      if (done) return;
      done = true;
      body.off('data', onData);
      const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      resolve(cut ? new StringDecoder('utf8').write(bytes.subarray(0, limit)) : bytes.toString('utf8'));
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      length += chunk.length;
      if (length >= limit) {
        body.destroy();
        finish(true);
      }
    };
    body.on('data', onData);
    body.once('end', () => finish(false));
    body.once('error', () => finish(true));
    body.once('close', () => finish(true));
  });
}

const FAILURE_BY_CODE: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset by the receiver',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'DNS lookup failed',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  UND_ERR_CONNECT_TIMEOUT: 'connection timed out',
  UND_ERR_HEADERS_TIMEOUT: 'no response headers within the timeout',
  UND_ERR_SOCKET: 'connection closed by the receiver',
  UND_ERR_CLOSED: 'connection closed',
};

function describeFailure(error: unknown): string {
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause : error;
  for (const candidate of [error, cause]) {
    if (candidate instanceof RefusedTargetError) return `refused target: ${candidate.message}`;
  }
  const code = (error as { code?: string }).code ?? (cause as { code?: string }).code;
  if (code !== undefined && FAILURE_BY_CODE[code]) return FAILURE_BY_CODE[code];
  const message = error instanceof Error ? error.message : String(error);
  if (code !== undefined && /CERT|TLS|SSL/i.test(code)) return `TLS error: ${message}`;
  return message;
}
