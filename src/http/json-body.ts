import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError, invalidRequest } from './errors.ts';

/** Keys that set an object's prototype when a parsed body is later merged into another object. */
function hasPrototypeKey(root: unknown): boolean {
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const value = stack.pop();
    if (value === null || typeof value !== 'object') continue;
    // A loop, not push(...items): a spread of a huge array overflows the argument limit.
    const items: unknown[] = Array.isArray(value) ? value : Object.values(value);
    if (!Array.isArray(value)) {
      if (Object.hasOwn(value, '__proto__')) return true;
      const constructor = Object.hasOwn(value, 'constructor') ? (value as Record<string, unknown>)['constructor'] : undefined;
      if (constructor !== null && typeof constructor === 'object' && Object.hasOwn(constructor, 'prototype')) return true;
    }
    for (const item of items) stack.push(item);
  }
  return false;
}

/**
 * Parses a JSON body the way Fastify's own parser does (prototype keys refused),
 * but says which mistake the client made: Fastify answers "not valid JSON" for all three.
 * @throws AppError 400 invalid_request.
 */
export function parseJsonBody(text: string): unknown {
  if (text.length === 0) throw invalidRequest('The JSON body is empty.');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw invalidRequest('The body is not valid JSON.');
  }
  // The walk is only needed when the text could hold such a key at all (secure-json-parse's shortcut).
  if ((text.includes('__proto__') || text.includes('constructor')) && hasPrototypeKey(value)) {
    throw invalidRequest('The body must not contain a "__proto__" key or a "constructor" object with a "prototype" key.');
  }
  return value;
}

/** A `charset` parameter naming anything but UTF-8 (RFC 8259: JSON between systems is UTF-8). */
const OTHER_CHARSET = /;\s*charset\s*=\s*(?!"?utf-8"?\s*(?:;|$))/i;

/** JSON routes take only application/json: Fastify's text/plain parser goes, and JSON gets ours. */
export function registerJsonBodies(app: FastifyInstance): void {
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request: FastifyRequest, body: string | Buffer, done) => {
    // Read as UTF-8 regardless, a body in another charset would be parsed as something the client did not send.
    if (OTHER_CHARSET.test(request.headers['content-type'] ?? '')) {
      return done(new AppError(415, 'unsupported_media_type', 'Send JSON in UTF-8 (charset=utf-8, or no charset).'), undefined);
    }
    try {
      done(null, parseJsonBody(typeof body === 'string' ? body : body.toString('utf8')));
    } catch (error) {
      done(error as Error, undefined);
    }
  });
}
