import fc from 'fast-check';

/** The part of JSON Schema the OpenAPI document uses (TypeBox's output). */
export interface JsonSchema {
  type?: string | string[];
  const?: unknown;
  enum?: unknown[];
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  propertyNames?: JsonSchema;
  items?: JsonSchema;
  minItems?: number;
  maxItems?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  format?: string;
  minimum?: number;
  maximum?: number;
  minProperties?: number;
  maxProperties?: number;
}

/** Values no schema of ours asks for, each a known way to break a parser, a query or a page. */
export const hostileStrings = fc.constantFrom(
  '', ' ', '\u0000', 'a\u0000b', '\r\nX-Injected: 1', '\u202eevil', '\ud800', '😀'.repeat(300), 'a'.repeat(70_000),
  "' OR 1=1 --", '"; DROP TABLE accounts; --', '../../../etc/passwd', '%00', '%zz', '${jndi:ldap://x}', '<script>alert(1)</script>',
  '__proto__', 'constructor', 'Infinity', '-Infinity', 'NaN', '1e400', '-1', '0x10', '9'.repeat(400), 'null', 'true', '[]', '{}',
  'tmk_' + 'A'.repeat(38), 'whsec_', 'mch_01jz0000000000000000000000', 'https://169.254.169.254/latest', 'javascript:alert(1)',
);

const hostileNumbers = fc.constantFrom(0, -0, -1, 1.5, 2 ** 31, 2 ** 53 + 2, -(2 ** 63), 1e308, -1e308, Number.MIN_VALUE);

/** Any JSON value, hostile ones more often than chance would give. */
export const hostileJson: fc.Arbitrary<unknown> = fc.oneof(
  hostileStrings,
  hostileNumbers,
  fc.constantFrom(null, true, false, [], {}, { __proto__: null }),
  fc.jsonValue({ maxDepth: 3 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
);

/** Nesting past any limit: an array or object this deep. */
export function deeplyNested(depth: number, asObject: boolean): unknown {
  let value: unknown = 1;
  for (let i = 0; i < depth; i++) value = asObject ? { a: value } : [value];
  return value;
}

/**
 * Values the schemas cannot describe but the service checks (an email address, a cron line, a size its
 * provider has), by property name, so that valid requests get through to the handlers often.
 */
const FIELD_HINTS: Record<string, fc.Arbitrary<unknown>> = {
  email: fc.emailAddress().filter((email) => email.length <= 254),
  password: fc.string({ minLength: 8, maxLength: 40 }),
  newPassword: fc.string({ minLength: 8, maxLength: 40 }),
  url: fc.webPath().map((path) => `https://hooks.example${path.startsWith('/') ? path : `/${path}`}`),
  cron: fc.constantFrom('* * * * *', '*/5 * * * *', '0 9 * * 1-5', '15,45 * 1 1 *'),
  size: fc.constantFrom('small', 'medium', 'large'),
};

/** A value that satisfies `schema`, as far as the generator knows how (formats and patterns included). */
export function validValue(schema: JsonSchema, depth = 0): fc.Arbitrary<unknown> {
  if (schema.const !== undefined) return fc.constant(schema.const);
  if (schema.enum) return fc.constantFrom(...schema.enum);
  const options = schema.anyOf ?? schema.oneOf;
  if (options) return fc.oneof(...options.map((option) => validValue(option, depth)));
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'string':
      if (schema.format === 'date-time') return fc.date({ min: new Date('2000-01-01'), max: new Date('2099-12-31'), noInvalidDate: true }).map((date) => date.toISOString());
      if (schema.pattern) return fc.stringMatching(new RegExp(schema.pattern)).filter((text) => text.length <= (schema.maxLength ?? Infinity));
      return fc.string({ minLength: schema.minLength ?? 0, maxLength: Math.min(schema.maxLength ?? 40, 40) });
    case 'integer':
      return fc.integer({ min: schema.minimum ?? -1000, max: schema.maximum ?? 1000 });
    case 'number':
      return fc.double({ min: schema.minimum ?? -1000, max: schema.maximum ?? 1000, noNaN: true });
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array': {
      const maxLength = Math.min(schema.maxItems ?? 4, 4);
      return fc.array(validValue(schema.items ?? {}, depth + 1), { minLength: Math.min(schema.minItems ?? 0, maxLength), maxLength });
    }
    case 'object': {
      if (schema.properties) {
        const model = Object.fromEntries(Object.entries(schema.properties).map(([name, property]) => [name, FIELD_HINTS[name] ? fc.oneof(FIELD_HINTS[name], validValue(property, depth + 1)) : validValue(property, depth + 1)]));
        return fc.record(model, { requiredKeys: schema.required ?? [] });
      }
      if (typeof schema.additionalProperties === 'object') {
        const keys = schema.propertyNames?.pattern ? fc.stringMatching(new RegExp(schema.propertyNames.pattern)) : fc.string({ minLength: 1, maxLength: 20 });
        return fc.dictionary(keys.filter((key) => key.length > 0 && key.length <= 64), validValue(schema.additionalProperties, depth + 1), { maxKeys: 3 });
      }
      return fc.constant({});
    }
    default:
      return depth > 2 ? fc.constant(null) : fc.jsonValue({ maxDepth: 2 });
  }
}

/**
 * A value that is valid, or one malformed variant of a valid one: a required
 * field dropped, an unknown field added, one field replaced by a hostile value or
 * another type, the whole value replaced, or nesting past every limit.
 */
export function bodyVariant(schema: JsonSchema): fc.Arbitrary<unknown> {
  const valid = validValue(schema);
  const fields = Object.keys(schema.properties ?? {});
  const variants: Array<fc.Arbitrary<unknown>> = [valid, valid, hostileJson, fc.constantFrom(deeplyNested(70, true), deeplyNested(70, false))];
  if (fields.length > 0) {
    variants.push(
      fc.tuple(valid, fc.constantFrom(...fields)).map(([value, field]) => withoutField(value, field)),
      fc.tuple(valid, fc.constantFrom(...fields), hostileJson).map(([value, field, replacement]) => withField(value, field, replacement)),
      fc.tuple(valid, fc.string({ minLength: 1, maxLength: 12 }), hostileJson).map(([value, field, extra]) => withField(value, field, extra)),
    );
  }
  return fc.oneof(...variants);
}

function withoutField(value: unknown, field: string): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  const copy: Record<string, unknown> = { ...(value as Record<string, unknown>) };
  delete copy[field];
  return copy;
}

function withField(value: unknown, field: string, replacement: unknown): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  return { ...(value as Record<string, unknown>), [field]: replacement };
}

/** Text for a query or path parameter: a valid value, or a hostile or loose one. */
export function parameterText(schema: JsonSchema): fc.Arbitrary<string> {
  const valid = validValue(schema).map((value) => (typeof value === 'string' ? value : JSON.stringify(value)));
  const loose = fc.constantFrom('Infinity', '-Infinity', '1e400', '1e1', '1.5', '-1', '0', '0x10', ' 5', '+5', '99999999999999999999', 'NaN', '-0');
  const numeric = schema.type === 'integer' || schema.type === 'number';
  return fc.oneof({ weight: 1, arbitrary: valid }, { weight: numeric ? 4 : 1, arbitrary: loose }, { weight: 1, arbitrary: hostileStrings }, { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 30 }) });
}
