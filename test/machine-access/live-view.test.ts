import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';
import { asBearer } from '../support/app.ts';
import { machineSuite, pathOf, runningMachine } from '../support/machines.ts';

const FIFTEEN_MINUTES = 15 * 60_000;

function screenOf(html: string): string {
  const match = /<img [^>]*src="data:image\/svg\+xml;base64,([A-Za-z0-9+/=]+)"/.exec(html);
  assert.ok(match, 'the page embeds the screen');
  return Buffer.from(match[1]!, 'base64').toString('utf8');
}

describe('live view', () => {
  const suite = machineSuite();

  test('a link valid 15 minutes shows the machine’s screen: a placeholder with its name and status', async () => {
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'agent <desk> & co' });
    const created = await suite.ctx.app.inject({ method: 'POST', url: `/api/machines/${machine.id}/live-view`, headers: asBearer(machine.mcpToken) });
    assert.equal(created.statusCode, 201);
    const link = created.json();
    assert.deepEqual(Object.keys(link).sort(), ['expiresAt', 'url']);
    assert.match(link.url, /^http:\/\/localhost:3000\/live\/[A-Za-z0-9_-]{43}$/);
    assert.equal(link.expiresAt, new Date(suite.ctx.clock.now() + FIFTEEN_MINUTES).toISOString());

    const page = await suite.ctx.app.inject({ method: 'GET', url: pathOf(link.url) });
    assert.equal(page.statusCode, 200);
    assert.equal(page.headers['content-type'], 'text/html; charset=utf-8');
    assert.match(String(page.headers['content-security-policy']), /default-src 'none'/);
    assert.equal(page.headers['referrer-policy'], 'no-referrer');
    assert.equal(page.headers['cache-control'], 'no-store');
    assert.ok(page.body.includes('agent &lt;desk&gt; &amp; co'), 'the name, escaped (the dashboard\'s one escapeHtml)');
    assert.ok(!page.body.includes('<desk>'));
    const screen = screenOf(page.body);
    assert.match(screen, /^<svg /);
    assert.ok(screen.includes('agent &lt;desk&gt; &amp; co'));
    assert.ok(screen.includes('>running<'));

    await suite.owner.call('POST', `/api/machines/${machine.id}/stop`);
    const later = await suite.ctx.app.inject({ method: 'GET', url: pathOf(link.url) });
    assert.ok(screenOf(later.body).includes('>stopped<'), 'the screen follows the machine');

    suite.ctx.clock.advance(FIFTEEN_MINUTES - 1);
    assert.equal((await suite.ctx.app.inject({ method: 'GET', url: pathOf(link.url) })).statusCode, 200);
    suite.ctx.clock.advance(1);
    const expired = await suite.ctx.app.inject({ method: 'GET', url: pathOf(link.url) });
    assertLinkGonePage(expired);
  });

  /** What a browser shows for a dead link: a small HTML page, with the live page's own security headers. */
  function assertLinkGonePage(response: Awaited<ReturnType<typeof suite.ctx.app.inject>>): void {
    assert.equal(response.statusCode, 404);
    assert.equal(response.headers['content-type'], 'text/html; charset=utf-8');
    assert.match(String(response.headers['content-security-policy']), /default-src 'none'/);
    assert.equal(response.headers['referrer-policy'], 'no-referrer');
    assert.equal(response.headers['cache-control'], 'no-store');
    assert.equal(response.headers['x-content-type-options'], 'nosniff');
    assert.match(response.body, /^<!doctype html>/);
    assert.match(response.body, /This live-view link has expired or is unknown\./);
    assert.ok(!response.body.includes('<img'), 'no screen');
  }

  test('regression: an expired or unknown link gave a browser application/problem+json; it is an HTML page saying so', async () => {
    assertLinkGonePage(await suite.ctx.app.inject({ method: 'GET', url: '/live/not-a-real-token' }));
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'short-look' });
    const link = (await suite.owner.call('POST', `/api/machines/${machine.id}/live-view`)).json();
    suite.ctx.clock.advance(FIFTEEN_MINUTES);
    assertLinkGonePage(await suite.ctx.app.inject({ method: 'GET', url: pathOf(link.url) }));
    await suite.ctx.app.jobs.drain();
    assertLinkGonePage(await suite.ctx.app.inject({ method: 'GET', url: pathOf(link.url) }));
  });

  test('unknown links are 404; only the hash of a link is stored; a destroyed machine’s links die', async () => {
    assertLinkGonePage(await suite.ctx.app.inject({ method: 'GET', url: '/live/not-a-real-token' }));
    const machine = await runningMachine(suite.ctx, suite.owner, { name: 'shared-screen' });
    const link = (await suite.owner.call('POST', `/api/machines/${machine.id}/live-view`)).json();
    const token = link.url.split('/').pop();
    const stored = JSON.stringify(await suite.ctx.app.deps.db.selectFrom('live_views').selectAll().execute());
    assert.ok(!stored.includes(token));
    assert.equal((await suite.ctx.app.inject({ method: 'GET', url: pathOf(link.url) })).statusCode, 200);
    await suite.owner.call('DELETE', `/api/machines/${machine.id}`);
    assertLinkGonePage(await suite.ctx.app.inject({ method: 'GET', url: pathOf(link.url) }));
  });
});
