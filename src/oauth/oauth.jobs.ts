import type { Deps } from '../deps.ts';
import { findAccountById } from '../accounts/accounts.repository.ts';
import { exponentialBackoff } from '../jobs/backoff.ts';
import { jobType, type JobKind } from '../jobs/job-kind.ts';
import type { Mailer } from '../mail/mailer.ts';
import { HOUR } from '../shared/clock.ts';
import { applicationConnectedMail } from './oauth.mail.ts';

/** The security notice of a new connected application, enqueued in the transaction that records the grant. */
export const applicationConnectedMailJob = jobType<{ accountId: string; clientName: string; redirectHost: string; at: string }>('mail.oauth-application-connected');

/** Like every mail to an account holder: 5 s doubling to at most an hour, for about a day. */
const retryDelay = exponentialBackoff({ firstMs: 5000, maxMs: HOUR, attempts: 35 });

export function applicationConnectedMailKind(deps: Deps, mailer: Mailer): JobKind<{ accountId: string; clientName: string; redirectHost: string; at: string }> {
  return {
    type: applicationConnectedMailJob,
    concurrency: 4,
    retryDelay,
    perform: async ({ payload }) => {
      const account = await findAccountById(deps.db, payload.accountId);
      if (account !== undefined) await mailer.send(applicationConnectedMail(deps.config.publicUrl, account, payload));
      return { status: 'done' };
    },
  };
}
