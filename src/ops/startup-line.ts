import type { Config } from '../config.ts';
import type { MachineHost } from '../machines/machines.plugin.ts';
import { databaseOf } from './startup-errors.ts';

/**
 * The one line a person reads when the service is up, beside the JSON log:
 * where the dashboard is, and what the service runs on (database, mail,
 * machines). It goes to stderr, like the one line of a failed start-up:
 * stdout carries only JSON lines, which log shippers parse one by one.
 */
export function describeStartup(config: Pick<Config, 'publicUrl' | 'role' | 'databaseUrl' | 'smtpUrl' | 'mailDir'>, address: string, machines: MachineHost, warnings: readonly string[] = []): string {
  const where = config.role === 'worker'
    ? `worker (ROLE=worker): background jobs, with /healthz, /readyz and /metrics at ${address}`
    : `dashboard and API at ${config.publicUrl} (listening on ${address})${config.role === 'api' ? ', no background jobs here (ROLE=api)' : ''}`;
  const database = config.databaseUrl === 'sqlite::memory:' ? 'an in-memory SQLite database (nothing is kept)' : databaseOf(config.databaseUrl);
  return [
    `Machine Platform is ready: ${where}`,
    database,
    config.smtpUrl === null ? `mail as .eml files in ${config.mailDir} (SMTP_URL is not set)` : `mail through ${smtpServerOf(config.smtpUrl)}`,
    describeMachines(machines),
    ...warnings.map((warning) => `WARNING: ${warning}`),
  ].join(' · ');
}

/** Which provider machines run on, and, where they run nothing, how to get real ones. */
export function describeMachines(host: MachineHost): string {
  if (host.provider === 'simulated') {
    return host.configured === 'auto'
      ? `machines on the simulated provider: they run no commands (MACHINE_PROVIDER=auto: ${host.noEngine}); for real machines, start a Docker engine (or point DOCKER_HOST at one) and restart`
      : 'machines on the simulated provider: they run no commands (MACHINE_PROVIDER=simulated; auto or docker for real machines on a Docker engine)';
  }
  const image = host.image();
  const building = image?.status === 'building' ? '; its machine image is being built (a few minutes, once): machines created meanwhile wait in starting' : '';
  return `machines on the docker provider (MACHINE_PROVIDER=${host.configured}${host.configured === 'auto' ? ': a Docker engine answered' : ''})${building}`;
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
