import websocket from '@fastify/websocket';
import type { RouteOptions } from 'fastify';
import fp from 'fastify-plugin';
import { DEFAULT_TOOL_WAIT, type ToolWaitOptions } from '../mcp/tools.ts';
import { deleteExpiredLiveViews } from './live-views.repository.ts';
import { liveViewRoutes } from './live-view.routes.ts';
import { machineAccessRoutes } from './machine-access.routes.ts';
import { machineMetricsRoutes } from './machine-metrics.routes.ts';
import { machineMcpRoutes } from './machine-mcp.routes.ts';
import { machinePlatformTools } from './machines.mcp.ts';
import { terminalRoutes } from './terminal.routes.ts';
import { previewPlatformTools, registerPreviewTools } from './previews/preview-tools.ts';
import { previewsRoutes } from './previews/previews.routes.ts';
import { createPreviews } from './previews/previews.service.ts';

/**
 * Reaching into machines: files, processes, screens, live views, the
 * terminal, usage, port previews, and MCP (the machine's own endpoint and the
 * platform's machine tools).
 */
export const machineAccessPlugin = fp<{ toolWait?: Partial<ToolWaitOptions>; terminalGraceMs?: number }>(
  async (app, options) => {
    const { deps } = app;
    const provider = app.machineProvider;
    app.maintenance.add('expired live views', (now) => deleteExpiredLiveViews(deps.db, now));

    if (deps.config.role === 'worker') return;
    const toolWait = Object.freeze({ ...DEFAULT_TOOL_WAIT, ...options.toolWait });
    // WebSockets: live views' streams, control of a screen, terminals. @fastify/websocket wraps the handler of every
    // route registered after it, so that a request asking to upgrade is taken as a WebSocket handshake wherever it
    // goes (an unknown path's 404 answered "Missing or invalid Sec-WebSocket-Key header" as text/html). Routes that
    // are no WebSocket keep their own handler: they answer such a request as any other, and the connection closes
    // after it (refused-upgrades.ts).
    const plainHandlers = new WeakMap<object, RouteOptions['handler']>();
    app.addHook('onRoute', (route) => void (route.websocket ? undefined : plainHandlers.set(route, route.handler)));
    await app.register(websocket, { options: { maxPayload: 1024 * 1024 } });
    app.addHook('onRoute', (route) => {
      const plain = plainHandlers.get(route);
      if (plain !== undefined) route.handler = plain;
    });
    await app.register(liveViewRoutes);
    await app.register(terminalRoutes, options.terminalGraceMs !== undefined ? { graceMs: options.terminalGraceMs } : {});
    await app.register(machineAccessRoutes);
    await app.register(machineMetricsRoutes);
    const previews = createPreviews(deps, app.machineActivity);
    await app.register(previewsRoutes, { previews });
    // A provider that reaches no port inside machines (the simulated one) serves no previews: no tools to offer them.
    const servesPreviews = provider.connectPort !== undefined;
    await app.register(machineMcpRoutes, { toolWait, moreTools: servesPreviews ? [(server, context) => registerPreviewTools(server, context, previews)] : [] });
    app.platformMcpTools.push(machinePlatformTools(provider, toolWait));
    if (servesPreviews) app.platformMcpTools.push(previewPlatformTools(previews));
  },
  { name: 'machine-access', dependencies: ['machines', 'mcp', 'maintenance'] },
);
