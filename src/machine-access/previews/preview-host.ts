import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { AppError } from '../../http/errors.ts';
import { hostnameOf, type HostRoute } from '../../http/host-routes.ts';
import { buildProblem, PROBLEM_CONTENT_TYPE } from '../../http/problem.ts';
import { escapeHtml } from '../../shared/html.ts';
import { toProviderMachine } from '../../machines/machines.repository.ts';
import { PortClosed, type MachineProvider } from '../../providers/provider.ts';
import { portClosed, previewsNotSupported, previewUnreachable } from './previews.errors.ts';
import { decidePreview, type Previews } from './previews.service.ts';
import { proxyRequest, proxyUpgrade } from './preview-proxy.ts';

/** The service's own pages on a preview host: nothing of them runs, frames or is kept. */
const PAGE_HEADERS = {
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

/** A person's browser gets a page; an API client problem+json. */
function answerOf(publicUrl: string, error: AppError, accept: string | undefined): { headers: Record<string, string>; body: string } {
  if (accept !== undefined && accept.includes('text/html')) {
    const title = escapeHtml(buildProblem(publicUrl, error.status, error.code, error.message).title);
    const body = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><meta name="robots" content="noindex"><title>${title}</title>
<style>body{font-family:sans-serif;max-width:40rem;margin:4rem auto;padding:0 1rem;color:#1f2328}code{background:#f6f8fa;padding:0 .2em}</style></head>
<body><main><h1>${title}</h1><p>${escapeHtml(error.message)}</p><p><small>${error.status} · <code>${error.code}</code></small></p></main></body>
</html>
`;
    return { headers: { ...PAGE_HEADERS, 'content-type': 'text/html; charset=utf-8' }, body };
  }
  const body = JSON.stringify(buildProblem(publicUrl, error.status, error.code, error.message));
  return { headers: { ...PAGE_HEADERS, 'content-type': PROBLEM_CONTENT_TYPE }, body };
}

function refuse(publicUrl: string, response: ServerResponse, request: IncomingMessage, error: AppError): void {
  const { headers, body } = answerOf(publicUrl, error, request.headers.accept);
  response.writeHead(error.status, { ...headers, ...error.headers, 'content-length': Buffer.byteLength(body) });
  response.end(request.method === 'HEAD' ? undefined : body);
}

function refuseUpgrade(publicUrl: string, socket: Duplex, request: IncomingMessage, error: AppError): void {
  const { headers, body } = answerOf(publicUrl, error, request.headers.accept);
  let head = `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status]}\r\n`;
  for (const [name, value] of Object.entries({ ...headers, 'content-length': String(Buffer.byteLength(body)), connection: 'close' })) head += `${name}: ${value}\r\n`;
  socket.end(`${head}\r\n${body}`);
}

/**
 * The preview hosts (PREVIEW_URL): every request and upgrade is checked in
 * the order of `decidePreview` (previews.service.ts), then relayed to the machine's port through the
 * provider (the machine's agent), one connection each.
 */
export function previewHostRoute(previews: Previews, provider: MachineProvider): HostRoute {
  const { deps, hosts } = previews;
  const publicUrl = deps.config.publicUrl;
  const proto = deps.config.previewUrl.startsWith('https:') ? 'https' : 'http';

  /** The port's connection, or the error that says why there is none. */
  async function open(request: IncomingMessage): Promise<{ connection: Duplex; port: number; traffic: () => void } | { error: AppError } | { signedIn: { location: string; cookie: string } }> {
    const decision = await decidePreview(previews, { hostname: hostnameOf(request) ?? '', url: request.url ?? '/', method: request.method ?? 'GET', headers: request.headers });
    if (decision.kind === 'refused') return { error: decision.error };
    if (decision.kind === 'signed-in') return { signedIn: decision };
    const { machine, port } = decision;
    if (provider.connectPort === undefined) return { error: previewsNotSupported(provider.name) };
    // A request let through to the machine's port is activity, whatever the port answers.
    await previews.activity.touch(machine.id);
    try {
      return { connection: await provider.connectPort(toProviderMachine(machine), port), port, traffic: previews.activity.traffic(machine.id) };
    } catch (err) {
      deps.logger.warn({ err, machineId: machine.id, port }, 'a preview could not reach the machine');
      return { error: previewUnreachable(port) };
    }
  }

  /** Why the port's connection failed before the app answered. */
  const unanswered = (port: number) => (error: unknown) => (error instanceof PortClosed ? portClosed(port) : previewUnreachable(port));

  const failed = (err: unknown) => {
    deps.logger.error({ err }, 'a preview request failed');
    return new AppError(500, 'internal_error', 'The preview could not be served.');
  };

  return {
    claims: (hostname) => hosts.parse(hostname) !== null,

    request(request, response) {
      request.on('error', () => {});
      open(request).then(
        (opened) => {
          if ('error' in opened) return refuse(publicUrl, response, request, opened.error);
          if ('signedIn' in opened) {
            response.writeHead(302, { location: opened.signedIn.location, 'set-cookie': opened.signedIn.cookie, 'cache-control': 'no-store', 'referrer-policy': 'no-referrer', 'content-length': 0 });
            return response.end();
          }
          const why = unanswered(opened.port);
          proxyRequest(request, response, opened.connection, { proto, traffic: opened.traffic, failed: (error) => refuse(publicUrl, response, request, why(error)) });
        },
        (err: unknown) => refuse(publicUrl, response, request, failed(err)),
      );
    },

    upgrade(request, socket, head) {
      socket.on('error', () => {});
      open(request).then(
        (opened) => {
          if ('error' in opened) return refuseUpgrade(publicUrl, socket, request, opened.error);
          // A link is opened by a page, never by a WebSocket.
          if ('signedIn' in opened) return refuseUpgrade(publicUrl, socket, request, new AppError(400, 'invalid_request', 'Open the signed link in a browser first.'));
          const why = unanswered(opened.port);
          proxyUpgrade(request, socket, head, opened.connection, { proto, traffic: opened.traffic, failed: (error) => refuseUpgrade(publicUrl, socket, request, why(error)) });
        },
        (err: unknown) => refuseUpgrade(publicUrl, socket, request, failed(err)),
      );
    },
  };
}
