import { strict as assert } from 'node:assert';
import { createHash } from 'node:crypto';
import type { TestContext } from './app.ts';

/** Anything long enough to be a token: session and emailed-link tokens (base64url), `tmk_`/`tmm_` keys, URL capabilities. */
const TOKEN_LIKE = /[A-Za-z0-9_-]{20,}/g;

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/**
 * The hashes of every token the app handed out during the test, in any
 * response body, Set-Cookie header or mail, whether or not its row is still in
 * the database: a signed-out session, a revoked key or a used link is gone from
 * the tables at the end, but its hash must not have leaked meanwhile either.
 */
function issuedTokenHashes(ctx: TestContext): Set<string> {
  const texts = [...ctx.responses, ...ctx.cookies, ...ctx.smtp.messages.map((mail) => `${mail.raw}\n${mail.text}`)];
  const hashes = new Set<string>();
  for (const text of texts) for (const [candidate] of text.matchAll(TOKEN_LIKE)) hashes.add(sha256(candidate));
  return hashes;
}

/** Asserts that no response the app sent carries a password hash, any stored token hash or the hash of any token it issued. */
export async function assertNoStoredSecretInResponses(ctx: TestContext): Promise<void> {
  const { db } = ctx.app.deps;
  const stored = [
    ...(await db.selectFrom('accounts').select('password_hash as secret').execute()),
    ...(await db.selectFrom('sessions').select('token_hash as secret').execute()),
    ...(await db.selectFrom('email_tokens').select('token_hash as secret').execute()),
    ...(await db.selectFrom('api_keys').select('token_hash as secret').execute()),
  ].map((row) => row.secret);
  const secrets = new Set([...stored, ...issuedTokenHashes(ctx)]);
  assert.ok(secrets.size > 0 && ctx.responses.length > 0, 'there is something to check');
  for (const body of ctx.responses) {
    assert.doesNotMatch(body, /\$argon2/);
    // Token hashes are SHA-256 in hex: look every 64-character hex run up, rather than search every body for every hash.
    for (const [run] of body.matchAll(/[0-9a-f]{64,}/g)) {
      for (let start = 0; start + 64 <= run.length; start++) {
        assert.ok(!secrets.has(run.slice(start, start + 64)), 'a token hash appeared in a response');
      }
    }
  }
}
