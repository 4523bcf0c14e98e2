import type { WebhookConfig } from '../config.ts';

/**
 * When is a delivery retried? Here is the whole answer.
 *
 * An attempt succeeds with a 2xx status within WEBHOOK_TIMEOUT_MS; anything
 * else fails it: another status, a redirect, a timeout, a refused or
 * unreachable target (sender.ts decides). After the n-th failed attempt of a
 * series (n from 1) the next one is due `retryDelay(n)` later: by default
 * 30 s, 1, 2, 4, 8, 16 and 32 minutes, and after the 8th failure the delivery
 * is `failed` (WEBHOOK_RETRY_DELAYS and WEBHOOK_MAX_ATTEMPTS
 * change it). Every path that schedules an attempt goes through this one
 * function (the jobs runner applies it: src/jobs/runner.ts, `settle`):
 *
 * - an attempt that fails;
 * - a probe: after 5 consecutive failures an endpoint gets one attempt at a
 *   time, at most one a second (delivery.job.ts, `admit`);
 * - an attempt failed without a connection while a probe stands for its
 *   failing endpoint ("not sent"): it counts as an attempt, on this schedule;
 * - an attempt whose process died holding it: it is not counted (nothing was
 *   recorded); once its lease (8 s, renewed while it runs) runs out,
 *   another process makes it, and the schedule goes on from that attempt.
 *
 * A manual retry (POST …/deliveries/{id}/retry) starts a new series, due at
 * once. A paused endpoint's deliveries keep their due times and wait; a
 * deleted endpoint's are cancelled. test/event-webhooks/retry-schedule.test.ts
 * runs the default schedule through every one of these paths.
 */
export function retryDelay(failedAttempts: number, config: Pick<WebhookConfig, 'retryDelaysMs' | 'maxAttempts'>): number | null {
  if (failedAttempts >= config.maxAttempts) return null;
  const delays = config.retryDelaysMs;
  return delays[Math.min(failedAttempts, delays.length) - 1]!;
}
