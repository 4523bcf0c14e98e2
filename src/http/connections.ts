import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

/**
 * What the server knows of each connection, kept from Node's public events
 * (issue 42: it was read from Node's private `socket._httpMessage`, which a
 * Node upgrade may change). Node answers a connection's requests in order, one
 * response at a time; a connection handed over by the 'upgrade' event is no
 * longer Node's to answer on, whoever answers.
 */
export interface Connections {
  /** Starts watching a server's connections (before any request arrives). */
  watch(server: Server): void;
  /**
   * A request on this connection is being answered (or waits its turn behind
   * one), or the connection was handed over by an upgrade.
   */
  busy(socket: Duplex): boolean;
  /** The answer being written on this connection has begun: bytes written to the socket now would corrupt it. */
  answering(socket: Duplex): boolean;
  /** The request came by the server's 'upgrade' event, not as an ordinary request. */
  upgrading(request: IncomingMessage): boolean;
}

export function trackConnections(): Connections {
  // Insertion order is the order Node answers in: the first is the one being written.
  const unfinished = new WeakMap<Duplex, Set<ServerResponse>>();
  const handedOver = new WeakSet<Duplex>();
  const upgradeRequests = new WeakSet<IncomingMessage>();

  function track(request: IncomingMessage, response: ServerResponse): void {
    const socket = request.socket;
    let responses = unfinished.get(socket);
    if (responses === undefined) unfinished.set(socket, (responses = new Set()));
    responses.add(response);
    // Node lets go of a response when it has finished (its own 'finish' listener, added before this one), or when
    // the connection closes under it.
    const done = () => responses.delete(response);
    response.once('finish', done).once('close', done);
  }

  return {
    watch(server) {
      // At the emit, not as a listener: requests to hosts of their own (host-routes.ts, installed before this) never
      // reach the listeners, and Node answers them in turn on their connection all the same.
      const emit = server.emit;
      server.emit = function emitTracked(this: Server, event: string | symbol, ...args: unknown[]): boolean {
        if (event === 'request') track(args[0] as IncomingMessage, args[1] as ServerResponse);
        return (emit as (event: string | symbol, ...args: unknown[]) => boolean).call(this, event, ...args);
      } as typeof server.emit;
      // Upgrades the service's routes answer (@fastify/websocket), first; a host of its own keeps its upgrades to itself.
      server.prependListener('upgrade', (request: IncomingMessage, socket: Duplex) => {
        upgradeRequests.add(request);
        handedOver.add(socket);
      });
    },
    busy: (socket) => (unfinished.get(socket)?.size ?? 0) > 0 || handedOver.has(socket),
    answering(socket) {
      const responses = unfinished.get(socket);
      if (responses === undefined || responses.size === 0) return false;
      return responses.values().next().value!.headersSent;
    },
    upgrading: (request) => upgradeRequests.has(request),
  };
}
