import { strict as assert } from 'node:assert';
import type { TestContext } from './app.ts';

/** Asserts that no response the app sent carries a password hash or any stored token hash. */
export async function assertNoStoredSecretInResponses(ctx: TestContext): Promise<void> {
  const { db } = ctx.app.deps;
  const secrets = [
    ...(await db.selectFrom('accounts').select('password_hash as secret').execute()),
    ...(await db.selectFrom('sessions').select('token_hash as secret').execute()),
    ...(await db.selectFrom('email_tokens').select('token_hash as secret').execute()),
    ...(await db.selectFrom('api_keys').select('token_hash as secret').execute()),
  ].map((row) => row.secret);
  assert.ok(secrets.length > 0 && ctx.responses.length > 0, 'there is something to check');
  for (const body of ctx.responses) {
    assert.doesNotMatch(body, /\$argon2/);
    for (const secret of secrets) assert.ok(!body.includes(secret), 'a stored hash appeared in a response');
  }
}
