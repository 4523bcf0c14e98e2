import { strict as assert } from 'node:assert';
import { createHmac } from 'node:crypto';
import { describe, test } from 'node:test';
import { simulateCommand } from '../../src/providers/simulated.provider.ts';
import { firstCharacters } from '../../src/runs/run-events.ts';
import { computeSignature } from '../../src/event-webhooks/verify-webhook.js';
import { verifyInboundSignature } from '../../src/runs/signature.ts';

describe('inbound webhook signatures (the shared verifier, with an adapter)', () => {
  const secret = 'whsec_c2VjcmV0IGJ5dGVzIGZvciB0ZXN0aW5nIG9ubHkgISEhISE=';
  const body = Buffer.from('{"a":1}');
  const now = 1_800_000_000_000;
  const t = now / 1000;

  test('v1 is the lowercase hex HMAC-SHA256 of "<t>.<body>" keyed with the whole secret string', () => {
    const expected = createHmac('sha256', secret).update(`${t}.{"a":1}`).digest('hex');
    assert.equal(computeSignature(secret, t, body), expected);
    assert.match(expected, /^[0-9a-f]{64}$/);
  });

  test('verification accepts the exact header and refuses every alteration; the request is named by the signature that matched', () => {
    const v1 = computeSignature(secret, t, body);
    assert.deepEqual(verifyInboundSignature(secret, `t=${t},v1=${v1}`, body, now), { ok: true, signature: v1, timestamp: t });
    assert.deepEqual(verifyInboundSignature(secret, `t=${t}, v1=${v1}`, body, now), { ok: true, signature: v1, timestamp: t }, 'spaces after commas are tolerated');
    assert.deepEqual(verifyInboundSignature(secret, `t=${t},v1=${'0'.repeat(64)},v1=${v1}`, body, now), { ok: true, signature: v1, timestamp: t }, 'extra v1 values do not change the name');
    for (const header of [undefined, '', `t=${t}`, `v1=${v1}`, `t=abc,v1=${v1}`, `t=${t},v1=${v1.slice(1)}`, `t=${t},v0=${v1}`, `t=${t + 1},v1=${v1}`]) {
      assert.equal(verifyInboundSignature(secret, header, body, now).ok, false, String(header));
    }
    assert.equal(verifyInboundSignature(`${secret}x`, `t=${t},v1=${v1}`, body, now).ok, false);
    assert.equal(verifyInboundSignature(secret, `t=${t},v1=${v1}`, Buffer.from('{"a":2}'), now).ok, false);
  });

  test('bodies need not be JSON (the shared verifier parses events; inbound bodies are anything)', () => {
    for (const raw of ['', 'a=1&b=2', 'not json at all']) {
      const bytes = Buffer.from(raw);
      assert.equal(verifyInboundSignature(secret, `t=${t},v1=${computeSignature(secret, t, bytes)}`, bytes, now).ok, true, JSON.stringify(raw));
    }
  });

  test('the tolerance is 300 seconds either way', () => {
    const at = (offset: number) => `t=${t + offset},v1=${computeSignature(secret, t + offset, body)}`;
    assert.equal(verifyInboundSignature(secret, at(-300), body, now).ok, true);
    assert.equal(verifyInboundSignature(secret, at(300), body, now).ok, true);
    assert.equal(verifyInboundSignature(secret, at(-301), body, now).ok, false);
    assert.equal(verifyInboundSignature(secret, at(301), body, now).ok, false);
  });
});

describe('the simulated host', () => {
  test('echoes the command; `false` and `exit N` (N ≠ 0) at the end fail', () => {
    const echoed = (command: string, exitCode: number) => ({ exitCode, timedOut: false, stdout: command, stderr: '', output: command, truncated: false });
    assert.deepEqual(simulateCommand('ls -la'), echoed('ls -la', 0));
    assert.deepEqual(simulateCommand('false'), echoed('false', 1));
    assert.deepEqual(simulateCommand('  false  '), echoed('  false  ', 1));
    assert.equal(simulateCommand('exit 7').exitCode, 7);
    assert.equal(simulateCommand('make; exit 2').exitCode, 2);
    assert.equal(simulateCommand('make && exit 9 ').exitCode, 9);
    assert.equal(simulateCommand('exit 0').exitCode, 0);
    assert.equal(simulateCommand('echo exit 3 later').exitCode, 0);
    assert.equal(simulateCommand('myexit 3').exitCode, 0);
    assert.equal(simulateCommand('falsely').exitCode, 0);
  });
});

describe('run output in events', () => {
  test('keeps the first 2,000 characters, counting characters, not UTF-16 units', () => {
    assert.equal(firstCharacters('short', 2000), 'short');
    assert.equal(firstCharacters('x'.repeat(2001), 2000), 'x'.repeat(2000));
    assert.equal(firstCharacters('😀'.repeat(2001), 2000), '😀'.repeat(2000));
  });
});

describe('retries of a failing machine, schedule or pool', () => {
  test('5 s after the first failure, doubling, never more than 5 minutes', async () => {
    const { hostRetryDelay } = await import('../../src/machines/job-types.ts');
    assert.deepEqual([1, 2, 3, 4, 5, 6, 7, 8, 20].map(hostRetryDelay), [5_000, 10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000, 300_000]);
  });
});

describe('names', () => {
  test('are trimmed, one line, without control characters', async () => {
    const { checkName } = await import('../../src/machines/names.ts');
    assert.equal(checkName('  nightly backup '), 'nightly backup');
    assert.equal(checkName('Büro №2 😀'), 'Büro №2 😀');
    for (const bad of ['', '   ', 'a\nb', 'a\rb', 'a\tb', 'a\u0000', 'a\u001b[0m', 'a\u007f', 'a\u0085', 'a\u2028b', 'a\u2029b']) {
      assert.throws(() => checkName(bad), (error: { status?: number }) => error.status === 400, JSON.stringify(bad));
    }
  });
});
