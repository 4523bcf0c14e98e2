import { jobType } from '../jobs/job-kind.ts';

/** The one metering pass over every running machine, recurring every METERING_INTERVAL. */
export const meteringPassJob = jobType<Record<string, never>>('billing.metering-pass');

export const welcomeCreditMailJob = jobType<{ accountId: string; amount: string }>('mail.welcome-credit');
export const lowBalanceMailJob = jobType<{ accountId: string; balance: string }>('mail.low-balance');
export const balanceEmptyMailJob = jobType<{ accountId: string; balance: string }>('mail.balance-empty');
