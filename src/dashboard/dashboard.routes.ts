import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AppError } from '../http/errors.ts';
import { loadAssets, sendAsset, serveAssets } from '../http/static-assets.ts';
import { PUBLIC_DIR } from './assets.ts';
import { renderErrorDocs } from './error-docs.ts';
import { dashboardSecurityHeaders } from './security-headers.ts';

/**
 * Every path the dashboard answers with its page (the client-side router in
 * public/js/routes.js draws them), so each one loads directly from a link.
 */
export const PAGE_PATHS = [
  '/',
  '/sign-in',
  '/sign-up',
  '/forgot-password',
  '/reset-password',
  '/verify-email',
  '/account',
  '/account/security',
  '/account/sessions',
  '/account/api-keys',
  '/account/applications',
  '/oauth/consent',
  '/event-webhooks',
  '/event-webhooks/:id',
  '/machines',
  '/machines/:id',
  '/billing',
  '/events',
] as const;

const SHELL = 'index.html';
const hide = { hide: true };

/**
 * The dashboard: one HTML shell for every page path, its scripts and styles
 * from memory, and the error-code reference. Pages need no credential (the
 * scripts call the API, which checks the session), and are outside /api/, so
 * a link opened from a webmail site is not refused by the origin rule.
 */
export const dashboardRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const assets = await loadAssets(PUBLIC_DIR);
  // xterm.js for the machine's terminal, as published on npm (an ES module, its stylesheet, the fit addon).
  for (const [name, dir, file] of [['@xterm/xterm', 'lib', 'xterm.mjs'], ['@xterm/xterm', 'css', 'xterm.css'], ['@xterm/addon-fit', 'lib', 'addon-fit.mjs']]) {
    const root = dirname(dirname(fileURLToPath(import.meta.resolve(name!))));
    const asset = (await loadAssets(join(root, dir!))).get(file!);
    if (asset === undefined) throw new Error(`dashboard: ${name}/${dir}/${file} is missing`);
    assets.set(`vendor/xterm/${file}`, asset);
  }
  const shell = assets.get(SHELL);
  if (shell === undefined) throw new Error(`dashboard: ${SHELL} is missing`);
  const securityHeaders = dashboardSecurityHeaders(app.deps.config.secureCookies);
  const errorDocs = renderErrorDocs(app.deps.config.publicUrl);

  // Scoped to this plugin (no fastify-plugin wrapper): the API's responses are left alone.
  app.addHook('onSend', async (_request, reply, payload) => {
    reply.headers(securityHeaders);
    return payload;
  });

  const sendPage = (reply: FastifyReply, status: number) =>
    reply.code(status).header('cache-control', 'no-store').type(shell.contentType).send(shell.body);

  for (const path of PAGE_PATHS) {
    app.get(path, { config: { auth: 'none' }, schema: hide }, async (_request, reply) => sendPage(reply, 200));
  }

  app.get('/docs/errors', { config: { auth: 'none' }, schema: hide }, async (_request, reply) =>
    reply.header('cache-control', 'no-cache').type('text/html; charset=utf-8').send(errorDocs),
  );

  serveAssets(app, '/assets', assets);

  // Browsers ask for /favicon.ico on their own, on pages with no icon link (a live view, the error reference,
  // a JSON answer opened in a tab): every current one draws an SVG served there.
  const favicon = assets.get('favicon.svg');
  if (favicon === undefined) throw new Error('dashboard: favicon.svg is missing');
  app.get('/favicon.ico', { config: { auth: 'none' }, schema: hide }, async (request, reply) => sendAsset(request, reply, favicon));

  // Any other GET: the API keeps its problem+json 404, a person gets the page that says "not found".
  app.get('/*', { config: { auth: 'none' }, schema: hide }, async (request, reply) => {
    const path = request.url.split('?')[0]!;
    if (path.startsWith('/api/') || !acceptsHtml(request)) throw new AppError(404, 'not_found', `No route ${request.method} ${path}.`);
    return sendPage(reply, 404);
  });
};

function acceptsHtml(request: FastifyRequest): boolean {
  return (request.headers.accept ?? '').includes('text/html');
}
