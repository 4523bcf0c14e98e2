import { request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { pipeline, type Duplex } from 'node:stream';
import { PREVIEW_COOKIE, withoutCookie } from './preview-access.ts';

/** Headers of one connection, not of the message (RFC 9110 7.6.1): never relayed. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade']);
/** The preview's own credentials: the app never sees them. */
const PREVIEW_HEADER = 'x-preview-token';

function connectionTokens(value: string | string[] | undefined): Set<string> {
  const text = Array.isArray(value) ? value.join(',') : (value ?? '');
  return new Set(text.split(',').map((token) => token.trim().toLowerCase()).filter((token) => token !== ''));
}

/**
 * The request's headers as the app gets them, as raw pairs in their order
 * and case: without hop-by-hop headers (except an upgrade's own), the
 * preview token and the preview's cookie; with `X-Forwarded-Proto`.
 */
export function forwardedRequestHeaders(request: IncomingMessage, options: { upgrade: boolean; proto: string }): string[] {
  const named = connectionTokens(request.headers.connection);
  const raw = request.rawHeaders;
  const headers: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const lower = name.toLowerCase();
    const upgradeHeader = options.upgrade && (lower === 'connection' || lower === 'upgrade');
    if ((HOP_BY_HOP.has(lower) || named.has(lower)) && !upgradeHeader) continue;
    if (lower === PREVIEW_HEADER || lower === 'x-forwarded-proto') continue;
    let value = raw[i + 1]!;
    if (lower === 'cookie') {
      const kept = withoutCookie(value, PREVIEW_COOKIE);
      if (kept === undefined) continue;
      value = kept;
    }
    headers.push(name, value);
  }
  headers.push('X-Forwarded-Proto', options.proto);
  return headers;
}

/** A Set-Cookie without its Domain attribute: the app's cookies stay on their preview host, and never reach the dashboard. */
export function hostOnlyCookie(setCookie: string): string {
  return setCookie
    .split(';')
    .filter((attribute, index) => index === 0 || !/^\s*domain\s*=/i.test(attribute))
    .join(';');
}

/** The app's response headers, in their order and case, untouched but for hop-by-hop ones and cookies' Domain. */
export function relayedResponseHeaders(response: IncomingMessage): string[] {
  const named = connectionTokens(response.headers.connection);
  const raw = response.rawHeaders;
  const headers: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || named.has(lower)) continue;
    headers.push(name, lower === 'set-cookie' ? hostOnlyCookie(raw[i + 1]!) : raw[i + 1]!);
  }
  return headers;
}

/**
 * One request, relayed over its own connection to the machine's port:
 * bodies stream both ways with backpressure, nothing is buffered whole.
 * `failed` answers for a port with nothing listening or an app that does not
 * speak HTTP (only while nothing was sent yet).
 */
export function proxyRequest(request: IncomingMessage, response: ServerResponse, connection: Duplex, options: { proto: string; failed: (error: unknown) => void; traffic?: () => void }): void {
  connection.on('error', () => {});
  const upstream = httpRequest({
    method: request.method,
    path: request.url,
    headers: [...forwardedRequestHeaders(request, { upgrade: false, proto: options.proto }), 'Connection', 'close'],
    setHost: false,
    createConnection: () => connection,
  });
  const end = () => {
    upstream.destroy();
    connection.destroy();
  };
  upstream.once('response', (answer) => {
    response.sendDate = false;
    response.writeHead(answer.statusCode ?? 502, answer.statusMessage, relayedResponseHeaders(answer));
    pipeline(answer, response, end);
    // Listened to once the pipeline reads it: a long answer (server-sent events) is traffic as it flows.
    if (options.traffic) answer.on('data', options.traffic);
  });
  upstream.once('error', (error) => {
    if (!response.headersSent) options.failed(error);
    else response.destroy();
    end();
  });
  // A client that goes away ends the app's request too.
  response.once('close', () => {
    if (!response.writableFinished) end();
  });
  request.pipe(upstream);
}

/**
 * A WebSocket (or any upgrade): the request's head is written to the
 * machine's port as it came (less the preview's credentials), then bytes flow
 * both ways untouched, the app's own 101 included. `failed` answers for a
 * connection that fails before the app sent anything.
 */
export function proxyUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer, connection: Duplex, options: { proto: string; failed: (error: unknown) => void; traffic?: () => void }): void {
  const headers = forwardedRequestHeaders(request, { upgrade: true, proto: options.proto });
  let text = `${request.method} ${request.url} HTTP/${request.httpVersion}\r\n`;
  for (let i = 0; i < headers.length; i += 2) text += `${headers[i]}: ${headers[i + 1]}\r\n`;
  connection.write(`${text}\r\n`);
  if (head.length > 0) connection.write(head);
  const end = () => {
    socket.destroy();
    connection.destroy();
  };
  // Joined once the app sent its first bytes: a pipeline destroys the client's socket with the connection's error,
  // and a failure before that is answered on it.
  const early = (error: Error) => {
    connection.destroy();
    options.failed(error);
  };
  const unanswered = () => end();
  connection.once('error', early);
  connection.once('end', unanswered);
  socket.once('close', unanswered);
  connection.once('data', (first: Buffer) => {
    connection.off('error', early);
    connection.off('end', unanswered);
    socket.off('close', unanswered);
    connection.pause();
    socket.write(first);
    options.traffic?.();
    pipeline(socket, connection, end);
    pipeline(connection, socket, end);
    // Listened to once the pipelines read them, so no byte is taken from them: every chunk either way is traffic.
    if (options.traffic) {
      socket.on('data', options.traffic);
      connection.on('data', options.traffic);
    }
  });
}
