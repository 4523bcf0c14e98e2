import { Ajv, type ErrorObject, type Options } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifyReply, FastifyRequest, FastifySchemaCompiler } from 'fastify';
import { invalidRequest } from './errors.ts';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

const common: Options = { allErrors: false, useDefaults: true, removeAdditional: false, strictSchema: false };

/**
 * Bodies are strict: no type coercion ("true" is not a boolean) and unknown
 * fields are rejected by `additionalProperties: false`, never silently dropped.
 * Query strings and path parameters are text on the wire, so they are coerced,
 * numbers only from plain decimal text (see `refuseLooseNumbers`).
 */
export function createValidatorCompiler(): FastifySchemaCompiler<unknown> {
  const strict = createBodyAjv();
  const coercing = addFormats(new Ajv({ ...common, coerceTypes: 'array' }));
  return ({ schema, httpPart }) => {
    if (httpPart === 'body') return strict.compile(schema as object);
    return refuseLooseNumbers(schema as JsonSchema, coercing.compile(schema as object));
  };
}

/**
 * The validator of JSON bodies. MCP tools check their arguments with one of these too (mcp/tools.ts), against
 * the same TypeBox schemas as the HTTP routes, so that a tool and its route refuse the same input.
 */
export function createBodyAjv(): Ajv {
  return addFormats(new Ajv({ ...common, coerceTypes: false }));
}

interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
}

type Validator = ((data: unknown) => boolean) & { errors?: ErrorObject[] | null | undefined };

/** Decimal digits; a minus only before a digit other than a lone 0 ("-0" is no way to write zero). */
const INTEGER_TEXT = /^(?:0|-?[1-9][0-9]*)$/;
const NUMBER_TEXT = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?$/;

/**
 * Ajv coerces any text JavaScript reads as a number: "Infinity", "1e400" (both
 * Infinity), "-Infinity", "0x10", " 5". It then checks neither that the result
 * is finite nor its minimum and maximum (those keywords skip non-finite numbers),
 * so `limit=Infinity` passed validation and failed in SQL as a 500. Here a numeric
 * field of a query string or path takes plain decimal text only (an integer field,
 * digits with an optional minus), so what Ajv coerces is always a finite number
 * its range keywords then check; anything else is a 400.
 */
function refuseLooseNumbers(schema: JsonSchema, validate: Validator): Validator {
  const numeric = Object.entries(schema.properties ?? {}).flatMap(([name, property]) => {
    const grammar = numericGrammar(property);
    return grammar === null ? [] : [{ name, grammar, integer: grammar === INTEGER_TEXT }];
  });
  if (numeric.length === 0) return validate;
  const checked: Validator = (data) => {
    for (const { name, grammar, integer } of numeric) {
      const value = (data as Record<string, unknown> | null)?.[name];
      const texts = Array.isArray(value) ? value : [value];
      const loose = texts.some((text) => typeof text === 'string' && !(grammar.test(text) && isFiniteIn(Number(text), integer)));
      if (loose) {
        checked.errors = [{
          instancePath: `/${name}`,
          schemaPath: `#/properties/${name}/type`,
          keyword: 'type',
          params: { type: integer ? 'integer' : 'number' },
          message: integer ? 'must be a whole number written in decimal digits' : 'must be a number written in decimal digits',
        }];
        return false;
      }
    }
    const valid = validate(data);
    checked.errors = validate.errors;
    return valid;
  };
  return checked;
}

function isFiniteIn(value: number, integer: boolean): boolean {
  return integer ? Number.isSafeInteger(value) : Number.isFinite(value);
}

/** The text grammar of a numeric property (integer or number, possibly nullable), or null for any other. */
function numericGrammar(schema: JsonSchema): RegExp | null {
  const types = Array.isArray(schema.type) ? schema.type : schema.type === undefined ? [] : [schema.type];
  if (types.includes('integer')) return INTEGER_TEXT;
  if (types.includes('number')) return NUMBER_TEXT;
  for (const option of [...(schema.anyOf ?? []), ...(schema.oneOf ?? [])]) {
    const grammar = numericGrammar(option);
    if (grammar !== null) return grammar;
  }
  return null;
}

/**
 * No request of this API nests anywhere near this deep; past it, a body is
 * refused before anything that recurses over it (the validator, the MCP SDK,
 * JSON.stringify) can run out of stack and turn a client's mistake into a 500.
 */
export const MAX_JSON_DEPTH = 64;

export type JsonFlaw = 'nul' | 'too_deep' | null;

/**
 * Finds a NUL character (in a key or a string) or nesting beyond MAX_JSON_DEPTH.
 * Iterative, with its own stack: a body a megabyte deep must not exhaust the call stack.
 */
export function findJsonFlaw(root: unknown): JsonFlaw {
  const values: unknown[] = [root];
  const depths: number[] = [0];
  while (values.length > 0) {
    const value = values.pop();
    const depth = depths.pop()!;
    if (typeof value === 'string') {
      if (value.includes('\u0000')) return 'nul';
      continue;
    }
    // Raw bodies (inbound webhooks) are bytes, never stored as text.
    if (value === null || typeof value !== 'object' || ArrayBuffer.isView(value)) continue;
    if (depth >= MAX_JSON_DEPTH) return 'too_deep';
    if (Array.isArray(value)) {
      for (const item of value) {
        values.push(item);
        depths.push(depth + 1);
      }
      continue;
    }
    for (const [key, item] of Object.entries(value)) {
      if (key.includes('\u0000')) return 'nul';
      values.push(item);
      depths.push(depth + 1);
    }
  }
  return null;
}

/**
 * A preValidation hook. PostgreSQL text cannot hold U+0000, so a NUL in a body,
 * path or query string would fail its query as a 500; it is a client's mistake, a 400 on both engines.
 * Absurdly deep bodies are refused here too, before validation walks them.
 * @throws AppError 400 invalid_request.
 */
export function refuseUnsafeInput(request: FastifyRequest, _reply: FastifyReply, done: (error?: Error) => void): void {
  // Every request passes here; most have nothing to look at (a GET's empty params and query).
  const flaw = flawIn(request.body) ?? flawIn(request.params) ?? flawIn(request.query);
  if (flaw === 'nul') return done(invalidRequest('The request must not contain the NUL character (\\u0000).'));
  if (flaw === 'too_deep') return done(invalidRequest(`The JSON body is nested more than ${MAX_JSON_DEPTH} levels deep.`));
  done();
}

function flawIn(part: unknown): Exclude<JsonFlaw, null> | undefined {
  if (part === undefined || part === null || (typeof part === 'object' && isEmpty(part))) return undefined;
  return findJsonFlaw(part) ?? undefined;
}

function isEmpty(value: object): boolean {
  for (const _key in value) return false;
  return true;
}

/**
 * A route-level preValidation hook for routes that take no body (logout,
 * DELETEs): none at all, `{}` or `null` pass. Anything else is a client's
 * mistake, such as a field the route does not have, and would otherwise be ignored without a word.
 * A hook rather than a body schema: the OpenAPI document then shows no request body, which is the truth.
 * @throws AppError 400 invalid_request.
 */
export function refuseBody(request: FastifyRequest, _reply: FastifyReply, done: (error?: Error) => void): void {
  const { body } = request;
  const empty = body === undefined || body === null || (typeof body === 'object' && !Array.isArray(body) && !ArrayBuffer.isView(body) && Object.keys(body).length === 0);
  done(empty ? undefined : invalidRequest('This endpoint takes no request body: send none, or {}.'));
}
