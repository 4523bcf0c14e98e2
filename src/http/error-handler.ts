import { STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Connections } from './connections.ts';
import { AppError } from './errors.ts';
import { lingerIfAnsweredEarly } from './lingering-close.ts';
import { buildProblem, PROBLEM_CONTENT_TYPE } from './problem.ts';
import { closeIfRefusedUpgrade } from './refused-upgrades.ts';

const CODE_BY_CLIENT_STATUS: Record<number, string> = {
  400: 'invalid_request',
  401: 'unauthenticated',
  403: 'forbidden',
  404: 'not_found',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  429: 'rate_limited',
};

/**
 * The one place errors become responses. AppErrors and Fastify's own client
 * errors (validation, body parsing, media type, size) keep their message;
 * anything else is logged with its stack and answered with a generic 500,
 * because an unexpected error's message may carry internals.
 */
export function registerErrorHandler(app: FastifyInstance, publicUrl: string): void {
  const send = (reply: FastifyReply, status: number, code: string, detail: string, headers: Record<string, string> = {}) =>
    sendProblem(reply, publicUrl, status, code, detail, headers);

  app.setErrorHandler((error: FastifyError | AppError, request, reply) => {
    if (error instanceof AppError) return send(reply, error.status, error.code, error.message, error.headers);
    const status = error.statusCode;
    if (status !== undefined && status >= 400 && status < 500) {
      const code = CODE_BY_CLIENT_STATUS[status] ?? 'invalid_request';
      return send(reply, status, code, clientMessage(error));
    }
    request.server.deps.logger.error({ err: error, reqId: request.id, method: request.method, route: request.routeOptions.url }, 'unexpected error');
    if (status === 503) return send(reply, 503, 'service_unavailable', 'The service is shutting down or not ready.');
    return send(reply, 500, 'internal_error', 'Something went wrong on our side. The error has been logged.');
  });

  app.setNotFoundHandler((request, reply) =>
    send(reply, 404, 'not_found', `No route ${request.method} ${request.url.split('?')[0]}.`),
  );
}

export function sendProblem(reply: FastifyReply, publicUrl: string, status: number, code: string, detail: string, headers: Record<string, string> = {}) {
  reply.code(status).headers(headers).type(PROBLEM_CONTENT_TYPE);
  return reply.send(JSON.stringify(buildProblem(publicUrl, status, code, detail)));
}

/**
 * Fastify's `frameworkErrors` option: the router's own errors (a malformed
 * percent-encoding, an over-long path parameter) never reach the error handler,
 * and would otherwise go out as Fastify's plain JSON rather than problem+json.
 */
export function frameworkErrorHandler(publicUrl: string, connections: Connections) {
  return (error: FastifyError, request: FastifyRequest, reply: FastifyReply): void => {
    closeIfRefusedUpgrade(connections, request, reply);
    const status = error.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      sendProblem(reply, publicUrl, status, CODE_BY_CLIENT_STATUS[status] ?? 'invalid_request', clientMessage(error));
      return;
    }
    request.server.deps.logger.error({ err: error, reqId: request.id }, 'unexpected router error');
    sendProblem(reply, publicUrl, 500, 'internal_error', 'Something went wrong on our side. The error has been logged.');
  };
}

/**
 * Fastify's `clientErrorHandler` option: a request Node's HTTP parser refuses
 * (malformed, headers over the size limit, too slow) never becomes a request,
 * so the answer is written to the socket here, as problem+json like every other.
 */
export function clientErrorHandler(publicUrl: string, connections: Connections) {
  return (error: NodeJS.ErrnoException, socket: Socket): void => {
    // A reset connection has nobody left to answer.
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const [status, code, detail] = describeClientError(error.code);
    // An answer to an earlier request on this connection has begun: bytes written now would corrupt it (Node's own rule).
    if (socket.writable && !connections.answering(socket)) socket.write(rawProblemResponse(publicUrl, status, code, detail));
    socket.destroy(error);
  };
}

/**
 * Requests Node's server answers itself unless someone listens, so that they
 * get problem+json too: an `Expect` other than `100-continue` (Node: an empty
 * 417) and `CONNECT` (Node: the connection dropped without a word). Neither is
 * routed; their bodies are left unread, so the connection closes after the answer (lingering, as after every early answer).
 */
export function answerServerLevelRequests(server: Server, publicUrl: string): void {
  server.on('checkExpectation', (_request: IncomingMessage, response: ServerResponse) => {
    lingerIfAnsweredEarly(response);
    const body = JSON.stringify(buildProblem(publicUrl, 417, 'expectation_failed', 'The only expectation this service meets is "Expect: 100-continue".'));
    response.writeHead(417, { 'content-type': PROBLEM_CONTENT_TYPE, 'content-length': Buffer.byteLength(body), connection: 'close' });
    response.end(body);
  });
  server.on('connect', (_request: IncomingMessage, socket: Duplex) => {
    socket.on('error', () => {});
    socket.end(rawProblemResponse(publicUrl, 400, 'invalid_request', 'This service is not a proxy: CONNECT is not supported.'));
  });
}

/** A whole HTTP/1.1 response, for sockets that have no response object. */
function rawProblemResponse(publicUrl: string, status: number, code: string, detail: string): string {
  const body = JSON.stringify(buildProblem(publicUrl, status, code, detail));
  return `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: ${PROBLEM_CONTENT_TYPE}\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}

function describeClientError(code: string | undefined): [status: number, code: string, detail: string] {
  if (code === 'HPE_HEADER_OVERFLOW') return [431, 'headers_too_large', 'The request headers are larger than the server accepts (16 KiB).'];
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return [408, 'request_timeout', 'The request was not received in time.'];
  return [400, 'invalid_request', 'The request is not valid HTTP.'];
}

function clientMessage(error: FastifyError): string {
  if (error.validation) return `${error.message}.`;
  if (error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return 'Send the body as application/json.';
  if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return 'The request body is larger than 1 MiB.';
  if (error.code === 'FST_ERR_BAD_URL') return 'The URL has a malformed percent-encoding.';
  if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') return 'A path segment of the URL is too long.';
  // JSON bodies go through json-body.ts, which says what is wrong; a parser registered elsewhere may still throw this.
  if (error instanceof SyntaxError) return 'The body is not valid JSON.';
  return error.message;
}
