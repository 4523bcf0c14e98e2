import type { Deps } from '../deps.ts';
import { exponentialBackoff } from '../jobs/backoff.ts';
import type { JobKind, JobType, Outcome } from '../jobs/job-kind.ts';
import type { Recurring } from '../jobs/recurring.ts';
import type { Mailer, MailMessage } from '../mail/mailer.ts';
import { HOUR, SECOND } from '../shared/clock.ts';
import { balanceEmptyMailJob, lowBalanceMailJob, meteringPassJob, welcomeCreditMailJob } from './billing.job-types.ts';
import { balanceEmptyMail, lowBalanceMail, welcomeCreditMail } from './billing.mail.ts';
import { findRecipient } from './billing.repository.ts';
import { meteringPass } from './metering.ts';

const SENT: Outcome = { status: 'done' };
const mailRetryDelay = exponentialBackoff({ firstMs: 5 * SECOND, maxMs: HOUR, attempts: 35 });

function mailKind<Payload extends { accountId: string }>(
  deps: Deps,
  mailer: Mailer,
  type: JobType<Payload>,
  compose: (holder: { email: string; name: string }, payload: Payload) => MailMessage,
): JobKind<Payload> {
  return {
    type,
    concurrency: 4,
    retryDelay: mailRetryDelay,
    perform: async (job) => {
      const holder = await findRecipient(deps.db, job.payload.accountId);
      if (holder !== undefined) await mailer.send(compose(holder, job.payload));
      return SENT;
    },
  };
}

/**
 * The metering pass: one job for all processes (whichever holds it charges
 * every running machine), recurring every METERING_INTERVAL. A pass that
 * fails or whose process dies is simply run again: charges start from each
 * meter's watermark, so nothing is charged twice or lost.
 */
export function metering(deps: Deps): Recurring {
  const interval = deps.config.billing.meteringIntervalMs;
  return {
    type: meteringPassJob,
    intervalMs: interval,
    firstRetryMs: Math.min(interval, 5 * SECOND),
    async run() {
      const started = deps.clock.now();
      await meteringPass(deps, started);
      // Passes start an interval apart, however long each takes.
      return started + interval;
    },
  };
}

export function billingJobKinds(deps: Deps, mailer: Mailer) {
  const { publicUrl } = deps.config;
  return [
    mailKind(deps, mailer, welcomeCreditMailJob, (holder, { amount }) => welcomeCreditMail(publicUrl, holder, amount)),
    mailKind(deps, mailer, lowBalanceMailJob, (holder, { balance }) => lowBalanceMail(publicUrl, holder, balance)),
    mailKind(deps, mailer, balanceEmptyMailJob, (holder, { balance }) => balanceEmptyMail(publicUrl, holder, balance)),
  ] as JobKind<unknown>[];
}
