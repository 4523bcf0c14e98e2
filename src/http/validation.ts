import { Ajv, type Options } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifyReply, FastifyRequest, FastifySchemaCompiler } from 'fastify';
import { invalidRequest } from './errors.ts';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

const common: Options = { allErrors: false, useDefaults: true, removeAdditional: false, strictSchema: false };

/**
 * Bodies are strict: no type coercion ("true" is not a boolean) and unknown
 * fields are rejected by `additionalProperties: false`, never silently dropped.
 * Query strings and path parameters are text on the wire, so they are coerced.
 */
export function createValidatorCompiler(): FastifySchemaCompiler<unknown> {
  const strict = addFormats(new Ajv({ ...common, coerceTypes: false }));
  const coercing = addFormats(new Ajv({ ...common, coerceTypes: 'array' }));
  return ({ schema, httpPart }) => (httpPart === 'body' ? strict : coercing).compile(schema as object);
}

function containsNul(value: unknown): boolean {
  if (typeof value === 'string') return value.includes('\u0000');
  // Raw bodies (inbound webhooks) are bytes, never stored as text.
  if (ArrayBuffer.isView(value)) return false;
  if (Array.isArray(value)) return value.some(containsNul);
  if (value !== null && typeof value === 'object') return Object.entries(value).some(([key, item]) => key.includes('\u0000') || containsNul(item));
  return false;
}

/**
 * A preValidation hook. PostgreSQL text cannot hold U+0000, so a NUL in a body,
 * path or query string would fail its query as a 500; it is a client's mistake, a 400 on both engines.
 * @throws AppError 400 invalid_request.
 */
export function refuseNulCharacters(request: FastifyRequest, _reply: FastifyReply, done: (error?: Error) => void): void {
  if (containsNul(request.body) || containsNul(request.params) || containsNul(request.query)) {
    return done(invalidRequest('The request must not contain the NUL character (\\u0000).'));
  }
  done();
}
