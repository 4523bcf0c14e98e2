import { strict as assert } from 'node:assert';
import { createHmac } from 'node:crypto';
import { describe, test } from 'node:test';
import { simulateCommand } from '../../src/machines/simulated.provider.ts';
import { firstCharacters } from '../../src/runs/run-events.ts';
import { signatureOf, verifySignature } from '../../src/runs/signature.ts';

describe('inbound webhook signatures', () => {
  const secret = 'whsec_c2VjcmV0IGJ5dGVzIGZvciB0ZXN0aW5nIG9ubHkgISEhISE=';
  const body = Buffer.from('{"a":1}');
  const now = 1_800_000_000_000;
  const t = now / 1000;

  test('v1 is the lowercase hex HMAC-SHA256 of "<t>.<body>" keyed with the whole secret string', () => {
    const expected = createHmac('sha256', secret).update(`${t}.{"a":1}`).digest('hex');
    assert.equal(signatureOf(secret, t, body), expected);
    assert.match(expected, /^[0-9a-f]{64}$/);
  });

  test('verification accepts the exact header and refuses every alteration', () => {
    const v1 = signatureOf(secret, t, body);
    assert.deepEqual(verifySignature(secret, `t=${t},v1=${v1}`, body, now), { ok: true });
    assert.deepEqual(verifySignature(secret, `t=${t}, v1=${v1}`, body, now), { ok: true }, 'spaces after commas are tolerated');
    for (const header of [undefined, '', `t=${t}`, `v1=${v1}`, `t=abc,v1=${v1}`, `t=${t},v1=${v1.slice(1)}`, `t=${t},v0=${v1}`, `t=${t + 1},v1=${v1}`]) {
      assert.equal(verifySignature(secret, header, body, now).ok, false, String(header));
    }
    assert.equal(verifySignature(`${secret}x`, `t=${t},v1=${v1}`, body, now).ok, false);
    assert.equal(verifySignature(secret, `t=${t},v1=${v1}`, Buffer.from('{"a":2}'), now).ok, false);
  });

  test('the tolerance is 300 seconds either way', () => {
    const at = (offset: number) => `t=${t + offset},v1=${signatureOf(secret, t + offset, body)}`;
    assert.equal(verifySignature(secret, at(-300), body, now).ok, true);
    assert.equal(verifySignature(secret, at(300), body, now).ok, true);
    assert.equal(verifySignature(secret, at(-301), body, now).ok, false);
    assert.equal(verifySignature(secret, at(301), body, now).ok, false);
  });
});

describe('the simulated host', () => {
  test('echoes the command; `false` and `exit N` (N ≠ 0) at the end fail', () => {
    assert.deepEqual(simulateCommand('ls -la'), { exitCode: 0, output: 'ls -la' });
    assert.deepEqual(simulateCommand('false'), { exitCode: 1, output: 'false' });
    assert.deepEqual(simulateCommand('  false  '), { exitCode: 1, output: '  false  ' });
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
