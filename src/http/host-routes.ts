import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';

/** Requests to hosts of their own (machine previews): answered before Fastify routes anything. */
export interface HostRoute {
  /** Whether the host (lower-cased, without its port) is this route's. */
  claims(hostname: string): boolean;
  request(request: IncomingMessage, response: ServerResponse): void;
  upgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void;
}

export interface HostRoutes {
  add(route: HostRoute): void;
}

declare module 'fastify' {
  interface FastifyInstance {
    hostRoutes: HostRoutes;
  }
}

/** The Host header's name, lower-cased, without its port; null without one. */
export function hostnameOf(request: Pick<IncomingMessage, 'headers'>): string | null {
  const host = request.headers.host;
  if (host === undefined || host === '') return null;
  const name = host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.split(':')[0]!;
  return name.toLowerCase().replace(/\.$/, '');
}

/**
 * Takes the requests and upgrades of claimed hosts at the HTTP server, before
 * Fastify sees them: no route, hook, cookie or header of the API and the
 * dashboard ever applies to them. Requests that never reach the server
 * (`inject`, in tests) are taken by the first onRequest hook instead.
 */
export function takeHostsFirst(app: FastifyInstance): HostRoutes {
  const routes: HostRoute[] = [];
  const routeOf = (request: IncomingMessage): HostRoute | undefined => {
    if (routes.length === 0) return undefined;
    const hostname = hostnameOf(request);
    return hostname === null ? undefined : routes.find((route) => route.claims(hostname));
  };

  const server: Server = app.server;
  const emit = server.emit;
  server.emit = function emitUnlessClaimed(this: Server, event: string | symbol, ...args: unknown[]): boolean {
    if (event === 'request' || event === 'upgrade') {
      const route = routeOf(args[0] as IncomingMessage);
      if (route !== undefined) {
        if (event === 'request') route.request(args[0] as IncomingMessage, args[1] as ServerResponse);
        else route.upgrade(args[0] as IncomingMessage, args[1] as Duplex, args[2] as Buffer);
        return true;
      }
    }
    return (emit as (event: string | symbol, ...args: unknown[]) => boolean).call(this, event, ...args);
  } as typeof server.emit;

  app.addHook('onRequest', async (request, reply) => {
    const route = routeOf(request.raw);
    if (route === undefined) return;
    reply.hijack();
    route.request(request.raw, reply.raw);
    return reply;
  });

  const hostRoutes: HostRoutes = { add: (route) => void routes.push(route) };
  app.decorate('hostRoutes', hostRoutes);
  return hostRoutes;
}
