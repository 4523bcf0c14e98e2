import type { Config } from '../config.ts';
import { databaseOf } from './startup-errors.ts';

/**
 * The one line a person reads when the service is up, beside the JSON log:
 * where the dashboard is, and what the service runs on (database, mail,
 * machines). It goes to stderr, like the one line of a failed start-up:
 * stdout carries only JSON lines, which log shippers parse one by one.
 */
export function describeStartup(config: Pick<Config, 'publicUrl' | 'role' | 'databaseUrl' | 'smtpUrl' | 'mailDir' | 'machines'>, address: string, warnings: readonly string[] = []): string {
  const where = config.role === 'worker'
    ? `worker (ROLE=worker): background jobs, with /healthz, /readyz and /metrics at ${address}`
    : `dashboard and API at ${config.publicUrl} (listening on ${address})${config.role === 'api' ? ', no background jobs here (ROLE=api)' : ''}`;
  const database = config.databaseUrl === 'sqlite::memory:' ? 'an in-memory SQLite database (nothing is kept)' : databaseOf(config.databaseUrl);
  return [
    `Machine Platform is ready: ${where}`,
    database,
    config.smtpUrl === null ? `mail as .eml files in ${config.mailDir} (SMTP_URL is not set)` : `mail through ${smtpServerOf(config.smtpUrl)}`,
    `machines on the ${config.machines.provider} provider (MACHINE_PROVIDER)`,
    ...warnings.map((warning) => `WARNING: ${warning}`),
  ].join(' · ');
}

/** The SMTP server without its credentials. */
function smtpServerOf(smtpUrl: string): string {
  try {
    const url = new URL(smtpUrl);
    return `${url.protocol === 'smtps:' ? 'SMTPS' : 'SMTP'} on ${url.hostname}${url.port ? `:${url.port}` : ''}`;
  } catch {
    return 'SMTP';
  }
}
