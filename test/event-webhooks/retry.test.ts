import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { loadConfig } from '../../src/config.ts';
import { retryDelay } from '../../src/event-webhooks/retry.ts';

const MINUTE = 60_000;

test('the default schedule (CONTRACT 11): at once, then 30 s, 1, 2, 4, 8, 16 and 32 min; failed after the 8th attempt', () => {
  const config = loadConfig({}).webhook;
  assert.equal(config.maxAttempts, 8);
  const delays = Array.from({ length: 8 }, (_, i) => retryDelay(i + 1, config));
  assert.deepEqual(delays, [30_000, 1 * MINUTE, 2 * MINUTE, 4 * MINUTE, 8 * MINUTE, 16 * MINUTE, 32 * MINUTE, null]);
});

test('with WEBHOOK_MAX_ATTEMPTS raised, the 60-minute step applies and then repeats', () => {
  const config = loadConfig({ WEBHOOK_MAX_ATTEMPTS: '11' }).webhook;
  assert.deepEqual([8, 9, 10, 11].map((n) => retryDelay(n, config)), [60 * MINUTE, 60 * MINUTE, 60 * MINUTE, null]);
});

test('a shorter list repeats its last delay; one attempt in total means no retry at all', () => {
  const config = loadConfig({ WEBHOOK_RETRY_DELAYS: '100ms,2s', WEBHOOK_MAX_ATTEMPTS: '4' }).webhook;
  assert.deepEqual([1, 2, 3, 4].map((n) => retryDelay(n, config)), [100, 2000, 2000, null]);
  assert.equal(retryDelay(1, loadConfig({ WEBHOOK_MAX_ATTEMPTS: '1' }).webhook), null);
});
