import { deleteSpentEmailTokens } from '../accounts/email-tokens.repository.ts';
import { deleteIdleSessions } from '../accounts/sessions.repository.ts';
import { SESSION_IDLE_MS } from '../accounts/sessions.service.ts';
import { deleteExpiredWindows } from '../rate-limits/rate-limiter.ts';
import { DAY, MINUTE } from '../shared/clock.ts';
import type { Deps } from '../shared/deps.ts';

const INTERVAL_MS = 10 * MINUTE;
/** Longer than the longest rate-limit window. */
const RATE_LIMIT_RETENTION_MS = DAY;

/** Deletes rows that can no longer matter: idle sessions, spent links, old rate-limit windows. */
export async function collectGarbage(deps: Deps): Promise<void> {
  const now = deps.clock.now();
  await deleteIdleSessions(deps.db, now - SESSION_IDLE_MS);
  await deleteSpentEmailTokens(deps.db, now);
  await deleteExpiredWindows(deps.db, now - RATE_LIMIT_RETENTION_MS);
}

export function startMaintenance(deps: Deps): () => void {
  const timer = setInterval(() => {
    collectGarbage(deps).catch((err: unknown) => deps.logger.error({ err }, 'maintenance failed'));
  }, INTERVAL_MS);
  timer.unref();
  return () => clearInterval(timer);
}
