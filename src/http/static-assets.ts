import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { notFound } from './errors.ts';
import { readdir, readFile } from 'node:fs/promises';
import { extname, join, relative, sep } from 'node:path';

export interface Asset {
  body: Buffer;
  contentType: string;
  etag: string;
}

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/**
 * Every file of a folder (the dashboard's, a front-end package's), read once
 * at start-up and served from memory by its path relative to the folder
 * (`js/main.js`). A request can only name a key of this map, so no path ever
 * reaches the file system.
 */
export async function loadAssets(dir: string): Promise<Map<string, Asset>> {
  const assets = new Map<string, Asset>();
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  for (const entry of entries) {
    if (!entry.isFile()) continue;
    const contentType = CONTENT_TYPES[extname(entry.name)];
    if (contentType === undefined) continue;
    const path = join(entry.parentPath, entry.name);
    const body = await readFile(path);
    const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
    assets.set(relative(dir, path).split(sep).join('/'), { body, contentType, etag });
  }
  return assets;
}

/** An asset, revalidated by its ETag: names carry no hash (there is no build step), so browsers ask every time and get 304s. */
export function sendAsset(request: FastifyRequest, reply: FastifyReply, asset: Asset) {
  reply.header('cache-control', 'no-cache').header('etag', asset.etag);
  if (request.headers['if-none-match'] === asset.etag) return reply.code(304).send();
  return reply.type(asset.contentType).send(asset.body);
}

/** `GET <prefix>/*`: the assets by their paths, for anyone (no credential), out of the API's description. */
export function serveAssets(app: FastifyInstance, prefix: string, assets: ReadonlyMap<string, Asset>): void {
  app.get(`${prefix}/*`, { config: { auth: 'none' }, schema: { hide: true } }, async (request, reply) => {
    const asset = assets.get((request.params as { '*': string })['*']);
    if (asset === undefined) throw notFound('The file');
    return sendAsset(request, reply, asset);
  });
}
