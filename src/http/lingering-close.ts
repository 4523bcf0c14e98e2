import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/**
 * How long, after an answer that went out before its request's body had
 * arrived whole, what the client still sends is read and thrown away (nginx's
 * `lingering_time`, 30 s there). Long enough for a client that only reads the
 * answer once it has sent everything (Node's fetch, Python's http.client) to
 * finish sending megabytes; short enough that a client that keeps sending
 * holds neither a connection nor a shutdown for long. Then the connection is reset.
 */
export const LINGER_MS = 5_000;
/** How long the client may send nothing meanwhile before the connection is closed (nginx's `lingering_timeout`). */
export const LINGER_IDLE_MS = 2_000;
const LINGER_CHECK_MS = 250;

const lingering = new WeakSet<Socket>();

const dropChunk = () => {};

/** A connection whose client is still sending a body that was answered already: shutdown leaves it to its bound. */
export const isLingering = (socket: Socket): boolean => lingering.has(socket);

/**
 * Every answer that goes out before its request's body has arrived whole (a
 * body over the limit, a request refused before its body was read) is
 * followed by a lingering close, as nginx does it. Node ends such a connection,
 * when the answer says `Connection: close` (Fastify's body-limit answers do),
 * with `destroySoon()`: destroyed as soon as the answer is written, unread
 * bytes and all, and closing a socket with unread bytes makes the kernel reset
 * the connection (RFC 9112 section 9.6): a client still sending gets EPIPE or
 * ECONNRESET instead of its answer. Here the connection is only half-closed
 * after the answer, what still arrives is dropped as it comes (never
 * buffered), and the connection is closed once the client closes its side,
 * has sent nothing for LINGER_IDLE_MS, or LINGER_MS after the answer at the
 * latest. A connection kept alive (Node reads the rest of the body, with no
 * bound of its own) gets the same bound, and goes on as usual once the body
 * has arrived whole.
 */
export function lingerAfterEarlyAnswers(server: Server): void {
  // Before Fastify's handler: the response has its listener before anyone can end it.
  server.prependListener('request', (_request: IncomingMessage, response: ServerResponse) => lingerIfAnsweredEarly(response));
}

/** The same for one response: for those answered outside the 'request' event (an unmet `Expect`). */
export function lingerIfAnsweredEarly(response: ServerResponse): void {
  // Before Node's own 'finish' listener, which ends the connection or keeps it alive.
  response.prependListener('finish', answerFinished);
}

function answerFinished(this: ServerResponse): void {
  if (!this.req.complete) discardTheRest(this.req);
}

function discardTheRest(request: IncomingMessage): void {
  const socket = request.socket;
  lingering.add(socket);
  // Node's 'finish' listener calls this after an answer with `Connection: close`; only the destroying is left out.
  socket.destroySoon = () => socket.end();
  // Whoever was reading the body has had its answer: from now on each chunk is dropped as it comes.
  request.removeAllListeners('readable').removeAllListeners('data').on('data', dropChunk);

  const answeredAt = Date.now();
  let lastReadAt = answeredAt;
  let bytesRead = socket.bytesRead;
  const check = setInterval(() => {
    const now = Date.now();
    if (socket.bytesRead !== bytesRead) {
      bytesRead = socket.bytesRead;
      lastReadAt = now;
    }
    if (now - answeredAt >= LINGER_MS || now - lastReadAt >= LINGER_IDLE_MS) socket.destroy();
  }, LINGER_CHECK_MS).unref();
  const stop = () => {
    clearInterval(check);
    lingering.delete(socket);
  };
  socket.once('close', stop);
  request.once('end', () => {
    // The connection goes on as an ordinary keep-alive one, unless the answer ended it: then it waits for the client to close.
    if (socket.writableEnded) return;
    stop();
    socket.removeListener('close', stop);
    // Node's own again, for a later answer that ends the connection with its body read.
    Reflect.deleteProperty(socket, 'destroySoon');
  });
}
