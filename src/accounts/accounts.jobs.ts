import type { Deps } from '../deps.ts';
import { exponentialBackoff } from '../jobs/backoff.ts';
import { jobType, type JobKind, type Outcome } from '../jobs/job-kind.ts';
import type { Mailer } from '../mail/mailer.ts';
import { DAY, HOUR } from '../shared/clock.ts';
import { generateOpaqueToken, hashToken } from '../shared/secrets.ts';
import { resetMailAllowed } from './accounts.limits.ts';
import { factorChangedMail, passwordChangedMail, passwordResetMail, verificationMail, type FactorChange } from './accounts.mail.ts';
import { findAccountByEmail, findAccountById, type Account } from './accounts.repository.ts';
import type { EmailTokenPurpose } from './accounts.tables.ts';
import { insertEmailToken } from './email-tokens.repository.ts';

/**
 * Every mail to an account holder is a job, enqueued in the transaction of the
 * change it tells of: a process killed right after the commit still sends it
 * (at least once), and a failing SMTP server is retried, not a mail lost.
 * Emailed links are issued when the mail is sent, so the database never holds
 * a usable link, only its hash.
 */
export const confirmationMailJob = jobType<{ accountId: string }>('mail.email-confirmation');
/** Every `forgot` is one of these, known address or not: whether a mail goes out is decided here, after the answer. */
export const passwordResetMailJob = jobType<{ email: string; ip: string }>('mail.password-reset');
export const passwordNoticeJob = jobType<{ accountId: string; how: 'changed' | 'reset'; at: string }>('mail.password-notice');

/** Every change of a second factor (and every recovery code used) is told to the holder; `detail` is a passkey's name, never a secret. */
export const factorNoticeJob = jobType<{ accountId: string; change: FactorChange; at: string; detail?: string }>('mail.factor-notice');

export const TOKEN_LIFETIME: Record<EmailTokenPurpose, number> = { verify_email: DAY, reset_password: HOUR };

/** 5 s doubling to at most an hour, for about a day: then the mail is given up (and logged). */
export const mailRetryDelay = exponentialBackoff({ firstMs: 5000, maxMs: HOUR, attempts: 35 });

const SENT: Outcome = { status: 'done' };

async function issueEmailToken(deps: Deps, accountId: string, purpose: EmailTokenPurpose): Promise<string> {
  const token = generateOpaqueToken();
  const now = deps.clock.now();
  await insertEmailToken(deps.db, { tokenHash: hashToken(token), accountId, purpose, expiresAt: now + TOKEN_LIFETIME[purpose], now });
  return token;
}

function mailKind<Payload>(type: ReturnType<typeof jobType<Payload>>, send: (payload: Payload) => Promise<void>): JobKind<Payload> {
  return {
    type,
    concurrency: 4,
    retryDelay: mailRetryDelay,
    perform: async (job) => {
      await send(job.payload);
      return SENT;
    },
  };
}

/** The kinds of mail the accounts domain sends. */
export function accountMailKinds(deps: Deps, mailer: Mailer) {
  const { publicUrl } = deps.config;
  const accountOf = async (accountId: string): Promise<Account | undefined> => findAccountById(deps.db, accountId);
  return [
    mailKind(confirmationMailJob, async ({ accountId }) => {
      const account = await accountOf(accountId);
      // Deleted, or confirmed meanwhile (by another link, or a password reset): nothing left to confirm.
      if (account === undefined || account.emailVerified) return;
      await mailer.send(verificationMail(publicUrl, account, await issueEmailToken(deps, account.id, 'verify_email')));
    }),
    mailKind(passwordResetMailJob, async ({ email, ip }) => {
      // Unknown addresses and addresses over the mail limit get nothing; the answer was the same either way.
      if (!(await resetMailAllowed(deps, email, ip))) return;
      const account = await findAccountByEmail(deps.db, email);
      if (account === undefined) return;
      await mailer.send(passwordResetMail(publicUrl, account, await issueEmailToken(deps, account.id, 'reset_password')));
    }),
    mailKind(passwordNoticeJob, async ({ accountId, how, at }) => {
      const account = await accountOf(accountId);
      if (account !== undefined) await mailer.send(passwordChangedMail(publicUrl, account, how, at));
    }),
    mailKind(factorNoticeJob, async ({ accountId, change, at, detail }) => {
      const account = await accountOf(accountId);
      if (account !== undefined) await mailer.send(factorChangedMail(publicUrl, account, change, at, detail));
    }),
  ];
}
