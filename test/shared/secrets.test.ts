import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';
import { generateOpaqueToken, generateSigningSecret, generateToken, hashToken, isWellFormedToken } from '../../src/shared/secrets.ts';
import { breakChecksum, hasValidChecksum, scannerChecksum } from '../support/tokens.ts';

describe('API and machine tokens', () => {
  test('are the prefix, 32 random base62 characters and a 6-character CRC32 checksum', () => {
    for (const prefix of ['tmk_', 'tmm_'] as const) {
      const tokens = new Set<string>();
      for (let i = 0; i < 200; i++) {
        const token = generateToken(prefix);
        assert.match(token, new RegExp(`^${prefix}[0-9A-Za-z]{38}$`));
        assert.ok(hasValidChecksum(token, prefix), `${token} carries the checksum a scanner computes`);
        assert.ok(isWellFormedToken(token, prefix));
        tokens.add(token);
      }
      assert.equal(tokens.size, 200);
    }
  });

  test('use all 62 characters in the random part', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 200; i++) for (const c of generateToken('tmk_').slice(4, 36)) seen.add(c);
    assert.equal(seen.size, 62);
  });

  test('checksums shorter than 6 base62 digits are left-padded with 0', () => {
    let i = 0;
    while (!scannerChecksum(String(i).padStart(32, '0')).startsWith('0')) i++;
    const random = String(i).padStart(32, '0');
    const token = `tmk_${random}${scannerChecksum(random)}`;
    assert.equal(token.length, 42);
    assert.ok(isWellFormedToken(token, 'tmk_'));
    assert.equal(isWellFormedToken(`tmk_${random}${scannerChecksum(random).replace(/^0+/, '')}`, 'tmk_'), false, 'unpadded');
  });

  test('isWellFormedToken refuses a wrong checksum, prefix, length or alphabet', () => {
    const token = generateToken('tmk_');
    assert.equal(isWellFormedToken(breakChecksum(token), 'tmk_'), false);
    assert.equal(isWellFormedToken(token, 'tmm_'), false);
    assert.equal(isWellFormedToken(`tmm_${token.slice(4)}`, 'tmk_'), false);
    assert.equal(isWellFormedToken(token.slice(0, -1), 'tmk_'), false);
    assert.equal(isWellFormedToken(`${token}0`, 'tmk_'), false);
    assert.equal(isWellFormedToken('', 'tmk_'), false);
    const random = `${'a'.repeat(31)}-`;
    assert.equal(isWellFormedToken(`tmk_${random}${scannerChecksum(random)}`, 'tmk_'), false, 'a non-base62 character');
    const swapped = `tmk_${token.slice(5, 36)}${token[4]}${token.slice(36)}`;
    if (swapped !== token) assert.equal(isWellFormedToken(swapped, 'tmk_'), false, 'a changed random part');
  });
});

describe('other secrets', () => {
  test('webhook signing secrets are whsec_ + base64 of 32 random bytes', () => {
    const secrets = new Set<string>();
    for (let i = 0; i < 50; i++) {
      const secret = generateSigningSecret();
      assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
      assert.equal(Buffer.from(secret.slice('whsec_'.length), 'base64').length, 32);
      secrets.add(secret);
    }
    assert.equal(secrets.size, 50);
  });

  test('session and emailed-link tokens are 32 random bytes, base64url', () => {
    const token = generateOpaqueToken();
    assert.match(token, /^[A-Za-z0-9_-]{43}$/);
    assert.equal(Buffer.from(token, 'base64url').length, 32);
    assert.notEqual(generateOpaqueToken(), token);
  });

  test('hashToken is the lowercase hex SHA-256 of the token', () => {
    assert.equal(hashToken('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    assert.equal(hashToken(''), 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    assert.match(hashToken(generateToken('tmk_')), /^[0-9a-f]{64}$/);
  });
});
