import { findAccountById } from '../accounts/accounts.repository.ts';
import type { Deps } from '../deps.ts';
import { announce } from '../db/signals.ts';
import { inTransaction } from '../db/transaction.ts';
import { exponentialBackoff } from '../jobs/backoff.ts';
import { jobType, type AnyJobKind, type JobKind } from '../jobs/job-kind.ts';
import type { Recurring } from '../jobs/recurring.ts';
import type { Mailer, MailMessage } from '../mail/mailer.ts';
import { MINUTE, SECOND, toIso } from '../shared/clock.ts';
import { attemptsBetween } from './deliveries.repository.ts';
import { endpointDisabledMail, endpointFailingMail, type FailingEndpoint } from './event-webhooks.mail.ts';
import { disableFailing, findEndpointById, findFailingEndpoints, markWarned } from './endpoints.repository.ts';

/**
 * Auto-disable. The delivery job keeps each endpoint's failing
 * clock (`failing_since`: the first failure since the last success). This
 * recurring job looks at the endpoints whose clock runs, at least once a
 * minute (or a fifth of WEBHOOK_DISABLE_AFTER, if shorter):
 * - failing for a fifth of the period: the owner is warned, once;
 * - failing for the whole period, with a failed attempt in each fifth of the
 *   last period and no success in it: disabled (`disabledReason: "failing"`),
 *   its lane paused as a manual pause would, and the owner told.
 * A fifth without any attempt (no events, say) keeps it enabled: it has not
 * been shown to fail then.
 */
export const healthCheckJob = jobType<Record<string, never>>('webhook.endpoint-health');
export const failingMailJob = jobType<{ endpointId: string; failingSince: number }>('mail.webhook-failing');
export const disabledMailJob = jobType<{ endpointId: string; failingSince: number }>('mail.webhook-disabled');

export function healthCheck(deps: Deps): Recurring {
  return {
    type: healthCheckJob,
    intervalMs: Math.min(MINUTE, Math.floor(deps.config.webhook.disableAfterMs / 5)),
    firstRetryMs: 5 * SECOND,
    run: () => checkEndpoints(deps),
  };
}

/** Whether each fifth of [start, start + period) has a failed attempt of the endpoint, and none a success. */
async function failedThroughout(deps: Deps, endpointId: string, start: number, period: number): Promise<boolean> {
  if (await attemptsBetween(deps.db, endpointId, start, start + period, true)) return false;
  const fifth = period / 5;
  for (let k = 0; k < 5; k++) {
    if (!(await attemptsBetween(deps.db, endpointId, start + k * fifth, start + (k + 1) * fifth, false))) return false;
  }
  return true;
}

async function checkEndpoints(deps: Deps): Promise<void> {
  const period = deps.config.webhook.disableAfterMs;
  const now = deps.clock.now();
  for (const endpoint of await findFailingEndpoints(deps.db)) {
    const since = Number(endpoint.failing_since);
    const payload = { endpointId: endpoint.id, failingSince: since };
    if (now - since >= period && (await failedThroughout(deps, endpoint.id, now - period, period))) {
      await inTransaction(deps.database, async (tx) => {
        if (!(await disableFailing(tx.db, endpoint.id, since, now))) return;
        // Its pending deliveries wait, as a paused endpoint's do.
        await deps.jobs.pauseLane(tx, endpoint.id);
        await announce(deps.signals, tx, `endpoint:${endpoint.id}`);
        await deps.jobs.enqueue(tx, disabledMailJob, [{ payload }]);
      });
      deps.logger.warn({ endpointId: endpoint.id, failingSince: toIso(since) }, 'disabled a webhook endpoint that kept failing');
    } else if (endpoint.warned_at === null && now - since >= period / 5) {
      await inTransaction(deps.database, async (tx) => {
        if (await markWarned(tx.db, endpoint.id, since, now)) await deps.jobs.enqueue(tx, failingMailJob, [{ payload }]);
      });
    }
  }
}

function mailKind(deps: Deps, mailer: Mailer, type: typeof failingMailJob, compose: (endpoint: FailingEndpoint, to: { email: string; name: string }) => MailMessage): JobKind<{ endpointId: string; failingSince: number }> {
  return {
    type,
    concurrency: 4,
    // 5 s doubling to at most an hour, for about a day (as account mails are retried).
    retryDelay: exponentialBackoff({ firstMs: 5 * SECOND, maxMs: 60 * MINUTE, attempts: 35 }),
    async perform({ payload }) {
      const endpoint = await findEndpointById(deps.db, payload.endpointId);
      // Deleted meanwhile: nothing to tell.
      const account = endpoint && (await findAccountById(deps.db, endpoint.account_id));
      if (endpoint === undefined || account === undefined) return { status: 'done' };
      await mailer.send(compose({ id: endpoint.id, url: endpoint.url, failingSince: toIso(payload.failingSince) }, account));
      return { status: 'done' };
    },
  };
}

/** The owner's mails about a failing endpoint. */
export function endpointHealthMailKinds(deps: Deps, mailer: Mailer): AnyJobKind[] {
  const { publicUrl } = deps.config;
  const period = deps.config.webhook.disableAfterMs;
  return [
    mailKind(deps, mailer, failingMailJob, (endpoint, to) => endpointFailingMail(publicUrl, to, endpoint, period)),
    mailKind(deps, mailer, disabledMailJob, (endpoint, to) => endpointDisabledMail(publicUrl, to, endpoint, period)),
  ] as AnyJobKind[];
}
