import type { WebhookConfig } from '../config.ts';

/**
 * CONTRACT 11: after the n-th failed attempt of a series (n from 1) the next
 * one waits delays[n-1], the last delay repeating; null once the series has
 * made maxAttempts attempts, and the delivery is failed.
 */
export function retryDelay(failedAttempts: number, config: Pick<WebhookConfig, 'retryDelaysMs' | 'maxAttempts'>): number | null {
  if (failedAttempts >= config.maxAttempts) return null;
  const delays = config.retryDelaysMs;
  return delays[Math.min(failedAttempts, delays.length) - 1]!;
}
