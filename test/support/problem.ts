import { strict as assert } from 'node:assert';
import type { LightMyRequestResponse } from 'fastify';
import { PUBLIC_URL } from './app.ts';

/** Asserts an RFC 9457 answer (CONTRACT 3): the media type, exactly the five fields, and the given status and code. */
export function assertProblem(response: LightMyRequestResponse, status: number, code: string, publicUrl = PUBLIC_URL): void {
  assert.equal(response.statusCode, status, `expected ${status} ${code}, got ${response.statusCode} ${response.body}`);
  assert.match(String(response.headers['content-type']), /^application\/problem\+json(;|$)/);
  const body = response.json();
  assert.deepEqual(Object.keys(body).sort(), ['code', 'detail', 'status', 'title', 'type']);
  assert.equal(body.status, status);
  assert.equal(body.code, code);
  assert.equal(body.type, `${publicUrl}/docs/errors#${code}`);
  assert.equal(typeof body.title, 'string');
  assert.ok(body.title.length > 0);
  assert.equal(typeof body.detail, 'string');
  assert.ok(body.detail.length > 0);
}
