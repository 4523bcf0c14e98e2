import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { WebSocket } from '@fastify/websocket';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { accountIdOf } from '../http/auth.ts';
import { assertSocketFromOwnPage } from '../http/origin.ts';
import { notFound } from '../http/errors.ts';
import { IdParamsSchema, responses } from '../http/schemas.ts';
import { loadAssets, serveAssets } from '../http/static-assets.ts';
import { createLiveView, LIVE_VIEW_PATH, liveViewMachine, renderLiveView, revokeLiveViews } from './live-view.service.ts';
import { toProviderMachine } from '../machines/machines.repository.ts';
import { LiveViewSchema } from '../machines/machines.schemas.ts';
import { takeScreenshot } from './screens.service.ts';
import { getMachineRow } from '../machines/machines.service.ts';
import { notSupported, wrongStatus } from '../machines/machines.errors.ts';
import type { ScreenStream } from '../providers/provider.ts';

const tags = ['machines'];
const hide = { hide: true } as const;

/**
 * The page runs only its own scripts (this service's, noVNC's), connects only
 * to this service (the stream), shows only its own pictures, and sends no
 * referrer carrying the token.
 */
const LIVE_VIEW_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; connect-src 'self'; img-src 'self' data: blob:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
};

/** How often a stream checks that its link still holds (not expired, not revoked, the machine still running). */
export const STREAM_RECHECK_MS = 2000;
/** WebSocket close codes the page can read: the stream ended for the link or the machine (4001), or there is none (4004). */
const ENDED = 4001;
const NO_STREAM = 4004;

const Token = Type.Object({ token: Type.String({ minLength: 1, maxLength: 200 }) }, { additionalProperties: false });

export const liveViewRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { deps, machineProvider: provider } = app;
  // The page's script and noVNC (its ES modules, as published), from memory.
  const novnc = dirname(dirname(fileURLToPath(import.meta.resolve('@novnc/novnc'))));
  const assets = await loadAssets(fileURLToPath(new URL('./live-view/', import.meta.url)));
  // noVNC's files keep their own layout: core/ imports ../vendor/.
  for (const [path, asset] of await loadAssets(join(novnc, 'core'))) assets.set(`novnc/core/${path}`, asset);
  for (const [path, asset] of await loadAssets(join(novnc, 'vendor'))) assets.set(`novnc/vendor/${path}`, asset);

  app.post('/api/machines/:id/live-view', {
    config: { auth: 'machine' },
    schema: {
      tags,
      summary: "Create a 15-minute link to the machine's screen (machine token or API key)",
      params: IdParamsSchema,
      response: responses({ 201: LiveViewSchema }),
    },
  }, async (request, reply) => reply.code(201).send(await createLiveView(deps, accountIdOf(request), request.params.id)));

  app.delete('/api/machines/:id/live-view', {
    schema: { tags, summary: 'Revoke every live-view link of the machine: their pages and streams end', params: IdParamsSchema },
  }, async (request, reply) => {
    await revokeLiveViews(deps, accountIdOf(request), request.params.id);
    return reply.code(204).send(null);
  });

  app.get('/api/machines/:id/screenshot', {
    schema: { tags, summary: "A picture of a running machine's screen (image/png; 409 no_display without one)", params: IdParamsSchema },
  }, async (request, reply) => {
    const shot = await takeScreenshot(deps, provider, accountIdOf(request), request.params.id);
    return reply.type(shot.contentType).header('cache-control', 'no-store').send(shot.body);
  });

  serveAssets(app, `${LIVE_VIEW_PATH}/assets`, assets);

  app.get(`${LIVE_VIEW_PATH}/:token`, {
    config: { auth: 'none' },
    schema: {
      tags,
      summary: 'The live view page behind a link (an HTML 404 page once expired or unknown)',
      params: Token,
      security: [],
    },
  }, async (request, reply) => {
    const page = await renderLiveView(deps, provider, request.params.token);
    if (page.machineId !== null) await app.machineActivity.touch(page.machineId);
    return reply.code(page.status).headers(LIVE_VIEW_HEADERS).type('text/html; charset=utf-8').send(page.html);
  });

  app.get(`${LIVE_VIEW_PATH}/:token/status`, {
    config: { auth: 'none' },
    schema: { ...hide, params: Token },
  }, async (request, reply) => {
    const machine = await liveViewMachine(deps, request.params.token);
    if (machine === undefined) throw notFound('The live-view link');
    return reply.header('cache-control', 'no-store').send({ machine: machine.status });
  });

  app.get(`${LIVE_VIEW_PATH}/:token/screen`, {
    config: { auth: 'none' },
    schema: { ...hide, params: Token, querystring: Type.Object({ at: Type.Optional(Type.String({ maxLength: 20 })) }) },
  }, async (request, reply) => {
    const machine = await liveViewMachine(deps, request.params.token);
    if (machine === undefined) throw notFound('The live-view link');
    const shot = await provider.screen(toProviderMachine(machine)).catch(() => null);
    if (shot === null) throw notFound('A picture of the screen');
    await app.machineActivity.touch(machine.id);
    return reply.headers({ 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' }).type(shot.contentType).send(shot.body);
  });

  /**
   * The stream: the machine's view-only VNC session, bridged byte for byte to
   * the page's noVNC over this WebSocket, for as long as the link holds.
   */
  app.get(`${LIVE_VIEW_PATH}/:token/stream`, {
    config: { auth: 'none' },
    schema: { ...hide, params: Token },
    websocket: true,
  }, async (socket, request) => {
    const { token } = request.params as { token: string };
    const origin = request.headers.origin;
    if (origin !== undefined && origin !== deps.config.publicUrl) return socket.close(ENDED, 'foreign origin');
    const machine = await liveViewMachine(deps, token);
    if (machine === undefined || machine.status !== 'running') return socket.close(ENDED, 'the link or the machine ended');
    let stream: Awaited<ReturnType<NonNullable<typeof provider.streamScreen>>> = null;
    try {
      stream = (await provider.streamScreen?.(toProviderMachine(machine))) ?? null;
    } catch (err) {
      deps.logger.warn({ err, machineId: machine.id }, 'a live view could not reach the machine’s screen');
    }
    if (stream === null) return socket.close(NO_STREAM, 'no stream of this screen');
    const recheck = setInterval(() => {
      liveViewMachine(deps, token).then(
        (current) => {
          if (current === undefined || current.status !== 'running') end(ENDED, 'the link or the machine ended');
        },
        (err: unknown) => deps.logger.warn({ err }, 'could not check a live-view link'),
      );
    }, STREAM_RECHECK_MS);
    recheck.unref();
    const end = relay(socket, stream, app.machineActivity.traffic(machine.id), () => clearInterval(recheck));
  });

  /**
   * Control of the screen, for the machine's owner only (the dashboard of
   * this origin, or an API key): the machine's VNC session that takes mouse
   * and keyboard, over this WebSocket. A live-view link's stream never reaches
   * that session, whatever it sends.
   */
  app.get('/api/machines/:id/screen/control', {
    schema: { tags, summary: "Control of the machine's screen: upgrades to a WebSocket carrying RFB (VNC) that takes input", params: IdParamsSchema },
    preHandler: async (request) => {
      assertSocketFromOwnPage(request, deps.config.publicUrl);
      const machine = await getMachineRow(deps, accountIdOf(request), (request.params as { id: string }).id);
      if (provider.controlScreen === undefined) throw notSupported('control of the screen', provider.name);
      if (machine.status !== 'running') throw wrongStatus('be controlled', machine.status);
    },
    websocket: true,
  }, async (socket, request) => {
    const machine = await getMachineRow(deps, accountIdOf(request), (request.params as { id: string }).id);
    let stream: ScreenStream | null = null;
    try {
      stream = await provider.controlScreen!(toProviderMachine(machine));
    } catch (err) {
      deps.logger.warn({ err, machineId: machine.id }, 'control of a machine’s screen could not reach it');
    }
    if (stream === null) return socket.close(NO_STREAM, 'no screen to control on this machine');
    relay(socket, stream, app.machineActivity.traffic(machine.id), () => {});
  });
};

/** Bridges a WebSocket and a screen's RFB session byte for byte until either ends (each chunk either way is traffic); answers how to end both. */
function relay(socket: WebSocket, stream: ScreenStream, traffic: () => void, onEnd: () => void): (code: number, reason: string) => void {
  let closed = false;
  const end = (code: number, reason: string) => {
    if (closed) return;
    closed = true;
    onEnd();
    stream.close();
    socket.close(code, reason);
  };
  traffic();
  stream.output.on('data', (chunk: Buffer) => {
    traffic();
    socket.send(chunk);
  });
  stream.output.once('end', () => end(ENDED, 'the screen ended'));
  stream.output.once('error', () => end(ENDED, 'the screen ended'));
  socket.on('message', (data: Buffer) => {
    traffic();
    stream.write(data);
  });
  socket.once('close', () => end(1000, 'closed'));
  // A page that left while the session opened.
  if (socket.readyState !== socket.OPEN) end(1000, 'closed');
  return end;
}
