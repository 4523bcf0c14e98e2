import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { createUrlRedactor } from '../../src/http/request-log.ts';
import { createTestApp, type TestContext } from '../support/app.ts';

const SECRET = 'CapabilityToken0123456789abcdefXYZ';

describe('request logs never carry capability tokens', () => {
  let ctx: TestContext;
  const logs: string[] = [];
  before(async () => {
    ctx = await createTestApp({ logs });
  });
  after(() => ctx.close());

  const completed = () => logs.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.msg === 'request completed');

  test('live views, inbound webhooks and emailed links: the token is redacted, the rest of the URL kept', async () => {
    // Regression: only ?token= was masked, so /live/<token> and /api/hooks/<token> were written to the log as they came.
    const requests: Array<['GET' | 'POST', string]> = [
      ['GET', `/live/${SECRET}`],
      ['POST', `/api/hooks/${SECRET}`],
      ['GET', `/verify-email?token=${SECRET}`],
      ['GET', `/reset-password?x=1&token=${SECRET}`],
      ['GET', `/%6Cive/${SECRET}`],
      ['GET', `/live/${SECRET}/extra`],
      ['POST', `/api/hooks/${SECRET}/extra`],
      ['POST', `/api/%68ooks/${SECRET}`],
      ['GET', `/live/${encodeURIComponent(SECRET)}?TOKEN=${SECRET}`],
    ];
    const seen = logs.length;
    for (const [method, url] of requests) {
      const response = await ctx.app.inject({ method, url, headers: { 'content-type': 'application/json' }, payload: method === 'POST' ? '{}' : undefined });
      assert.ok(response.statusCode < 500, `${method} ${url}: ${response.statusCode} ${response.body}`);
    }
    await new Promise((resolve) => setImmediate(resolve));
    const lines = logs.slice(seen);
    assert.ok(lines.length >= requests.length, 'a line per request');
    for (const line of lines) assert.ok(!line.includes(SECRET), `a token in the log: ${line}`);
    const urls = completed().map((line) => line.url);
    assert.ok(urls.includes('/live/[redacted]'), JSON.stringify(urls));
    assert.ok(urls.includes('/api/hooks/[redacted]'));
    assert.ok(urls.includes('/reset-password?x=1&token=[redacted]'));
    assert.ok(urls.includes('/%6Cive/[redacted]'), 'odd encodings stay visible to an operator');
  });

  test('each line names the matched route; other URLs are logged as sent', async () => {
    const seen = logs.length;
    await ctx.app.inject({ method: 'GET', url: '/api/keys/key_01jz0000000000000000000000' });
    await ctx.app.inject({ method: 'GET', url: '/healthz?probe=1' });
    await new Promise((resolve) => setImmediate(resolve));
    const [keys, health] = logs.slice(seen).map((line) => JSON.parse(line) as Record<string, unknown>);
    assert.equal(health?.url, '/healthz?probe=1');
    assert.equal(health?.route, '/healthz');
    assert.equal(keys?.url, '/api/keys/key_01jz0000000000000000000000');
  });
});

test('createUrlRedactor: by route parameter, by capability prefix, and in the query', () => {
  const redact = createUrlRedactor(['/live', '/api/hooks']);
  assert.equal(redact('/live/abc', '/live/:token'), '/live/[redacted]');
  assert.equal(redact('/other/abc', '/other/:token'), '/other/[redacted]');
  assert.equal(redact('/api/hooks/abc/more', undefined), '/api/hooks/[redacted]/more');
  assert.equal(redact('/api/%68ooks/abc', undefined), '/api/%68ooks/[redacted]');
  assert.equal(redact('/api/keys/key_1', '/api/keys/:id'), '/api/keys/key_1');
  assert.equal(redact('/verify-email?token=abc&a=b', '/verify-email'), '/verify-email?token=[redacted]&a=b');
  assert.equal(redact('/x?%74oken=abc', undefined), '/x?%74oken=[redacted]');
  assert.equal(redact('/livex/abc', undefined), '/livex/abc');
});
