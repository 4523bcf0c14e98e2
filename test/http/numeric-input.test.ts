import { strict as assert } from 'node:assert';
import { before, describe, test } from 'node:test';
import { asBearer } from '../support/app.ts';
import { createMachine, machineSuite } from '../support/machines.ts';
import { assertProblem } from '../support/problem.ts';

interface Parameter {
  in: 'query' | 'path';
  name: string;
  schema: { type?: string; minimum?: number; maximum?: number };
}

interface Operation {
  method: string;
  path: string;
  parameters: Parameter[];
  body?: { properties?: Record<string, { type?: string; minimum?: number; maximum?: number }> };
}

/** Forms of text that JavaScript reads as a number (or as Infinity) but that are not a whole number in decimal digits, or are out of any range. */
const LOOSE_NUMBER_TEXTS = [
  'Infinity', '-Infinity', '+Infinity', 'NaN', // non-finite
  '1e400', '-1e400', '1e1', '1E2', '5e-1', // exponents, huge through an exponent
  '99999999999999999999', '9007199254740993', '1' + '0'.repeat(400), // huge
  '-1', '-0', '0', // negative, zero
  '1.5', '1.0', '.5', '5.', // fractional, or written as such
  '0x10', '0b11', '0o7', ' 5', '5 ', '+5', '05', '1_0', '', '٥', // other notations
];

/** Body values, as JSON text: what JSON.parse turns into a number that is not a whole number in range, or no number. */
const BAD_BODY_NUMBERS = ['1e400', '-1e400', '-1', '1.5', '21', '1e-1', '2.5e1', '"5"', 'null', 'true', '[5]', '1' + '0'.repeat(400)];

describe('numeric input: a finite whole number in range, or a 400', () => {
  const suite = machineSuite({ env: { RATE_LIMIT: 'off' } });
  let operations: Operation[];
  let machineId: string;
  let poolId: string;
  before(async () => {
    machineId = (await createMachine(suite.owner)).id;
    const pool = await suite.owner.call('POST', '/api/pools', { name: 'numbers', size: 'small', count: 0 });
    assert.equal(pool.statusCode, 201, pool.body);
    poolId = pool.json().id;
    const document = (await suite.ctx.app.inject({ method: 'GET', url: '/api/openapi.json' })).json() as {
      paths: Record<string, Record<string, { parameters?: Parameter[]; requestBody?: { content: Record<string, { schema: Operation['body'] }> } }>>;
    };
    operations = Object.entries(document.paths).flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, operation]) => ({
        method: method.toUpperCase(),
        path,
        parameters: operation.parameters ?? [],
        ...(operation.requestBody?.content['application/json']?.schema ? { body: operation.requestBody.content['application/json'].schema } : {}),
      })),
    );
  });

  /** The path with its parameters filled in: this account's machine and pool where the route names them. */
  const urlOf = (operation: Operation) =>
    operation.path.replace('{id}', operation.path.startsWith('/api/pools') ? poolId : machineId).replace('{token}', 'x').replace('{procId}', 'proc_01aaaaaaaaaaaaaaaaaaaaaaaa');

  test('every numeric query and path parameter of every operation refuses loose and out-of-range numbers with 400', async () => {
    // Regression: `limit=Infinity` (also `1e400`, `-Infinity`) passed Ajv's coercion and failed in SQL as a 500 on every list route.
    const numeric = operations.flatMap((operation) =>
      operation.parameters.filter((parameter) => parameter.schema.type === 'integer' || parameter.schema.type === 'number').map((parameter) => ({ operation, parameter })),
    );
    assert.ok(numeric.length >= 8, `the lists' limits are found: ${numeric.length}`);
    for (const { operation, parameter } of numeric) {
      assert.equal(parameter.in, 'query', 'numeric path parameters would need a form here too');
      const good = await suite.ctx.app.inject({ method: operation.method as 'GET', url: `${urlOf(operation)}?${parameter.name}=2`, headers: asBearer(suite.owner.key) });
      // A process's output is the Docker provider's: the simulated one answers 409 not_supported once the query is valid.
      const accepted = operation.path.includes('/processes/') ? 409 : 200;
      assert.equal(good.statusCode, accepted, `${operation.method} ${operation.path}?${parameter.name}=2: ${good.body}`);
      // Zero is out of range for a limit, but an offset or a wait starts there.
      const refused = LOOSE_NUMBER_TEXTS.filter((text) => !(text === '0' && parameter.schema.minimum === 0));
      for (const text of [...refused, String((parameter.schema.maximum ?? 100) + 1)]) {
        const url = `${urlOf(operation)}?${parameter.name}=${encodeURIComponent(text)}`;
        const response = await suite.ctx.app.inject({ method: operation.method as 'GET', url, headers: asBearer(suite.owner.key) });
        assert.equal(response.statusCode, 400, `${operation.method} ${url}: ${response.body}`);
        assertProblem(response, 400, 'invalid_request');
        assert.match(response.json().detail, new RegExp(`querystring/${parameter.name} must`), `${operation.method} ${url}`);
      }
      // Repeated, the parameter is a list: each element is held to the same rule.
      const repeated = await suite.ctx.app.inject({ method: operation.method as 'GET', url: `${urlOf(operation)}?${parameter.name}=Infinity&${parameter.name}=2`, headers: asBearer(suite.owner.key) });
      assertProblem(repeated, 400, 'invalid_request');
    }
  });

  test('every numeric field of every JSON body refuses non-finite, fractional, out-of-range and non-numbers with 400', async () => {
    const numeric = operations.flatMap((operation) =>
      Object.entries(operation.body?.properties ?? {})
        .filter(([, schema]) => schema.type === 'integer' || schema.type === 'number')
        .map(([field, schema]) => ({ operation, field, schema })),
    );
    assert.ok(numeric.length >= 2, 'the pools\' counts are found');
    for (const { operation, field, schema } of numeric) {
      // The other required fields, valid (a key repeated later wins, so the field under test overrides its sample).
      const base = operation.path === '/api/billing/payment-method'
        ? '{"number":"4242424242424242","cvc":"123","expMonth":12,"expYear":2030,'
        : operation.path === '/api/machines/{id}/runs'
          ? '{"command":"true",'
          : operation.path === '/api/machines/{id}/previews'
            ? '{"port":80,'
            : operation.path === '/api/machines/{id}/fork'
              ? '{"name":"n1",'
              : operation.method === 'POST' ? '{"name":"n1","size":"small",' : '{';
      // '21' and '2.5e1' stand for past the maximum (a pool's count); a port's is 65535.
      const past = (schema.maximum ?? 20) + 1;
      for (const text of BAD_BODY_NUMBERS.map((bad) => (bad === '21' ? String(past) : bad === '2.5e1' ? `${past / 10}e1` : bad))) {
        const response = await suite.ctx.app.inject({
          method: operation.method as 'POST',
          url: urlOf(operation),
          headers: { ...asBearer(suite.owner.key), 'content-type': 'application/json' },
          payload: `${base}"${field}":${text}}`,
        });
        assertProblem(response, 400, 'invalid_request');
        assert.match(response.json().detail, new RegExp(`body/${field} must`), `${operation.method} ${operation.path} ${field}=${text}`);
      }
    }
    // A JSON number is a number however it is written: 1e1 is 10.
    const written = await suite.ctx.app.inject({ method: 'PATCH', url: `/api/pools/${poolId}`, headers: { ...asBearer(suite.owner.key), 'content-type': 'application/json' }, payload: '{"count":1e1}' });
    assert.equal(written.statusCode, 200, written.body);
    assert.equal(written.json().count, 10);
  });
});
