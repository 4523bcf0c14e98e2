import { ConfigError, type Config } from '../config.ts';

export type StartupPhase = 'build' | 'listen';

interface SystemError {
  code?: unknown;
  message?: unknown;
  errors?: unknown;
}

/** SQLSTATE codes that PostgreSQL answers a connection with: "3D000" no such database, "28P01" bad password… */
const SQLSTATE = /^[0-9A-Z]{5}$/;
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'EAI_NONAME', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH']);
const FILE_CODES = new Set(['EACCES', 'EPERM', 'ENOTDIR', 'EEXIST', 'EROFS', 'EISDIR', 'ENOENT', 'ENOSPC']);

function codeOf(error: unknown): string | undefined {
  const system = error as SystemError | null;
  if (system === null || typeof system !== 'object') return undefined;
  if (typeof system.code === 'string') return system.code;
  // Node tries every address of a name and reports an AggregateError whose parts carry the code.
  if (Array.isArray(system.errors)) return system.errors.map(codeOf).find((code) => code !== undefined);
  return undefined;
}

function messageOf(error: unknown): string {
  const message = (error as SystemError | null)?.message;
  return typeof message === 'string' && message !== '' ? message.split('\n')[0]!.trim() : String(codeOf(error) ?? error);
}

/** The database the URL names, without its credentials (they must not reach a terminal or a log). */
export function databaseOf(databaseUrl: string): string {
  if (databaseUrl.startsWith('sqlite:')) return `the SQLite database at ${databaseUrl.slice('sqlite:'.length)}`;
  try {
    const url = new URL(databaseUrl);
    return `the PostgreSQL database "${decodeURIComponent(url.pathname.slice(1))}" on ${url.hostname}:${url.port || '5432'}`;
  } catch {
    return 'the PostgreSQL database';
  }
}

/**
 * The one line start-up prints when it fails (it names the
 * variable to fix). `known` is false for failures that are not a matter of
 * configuration (a bug): the line then only summarises, and the stack is worth printing.
 */
export function describeStartupFailure(error: unknown, phase: StartupPhase, config: Pick<Config, 'databaseUrl' | 'host' | 'port'>): { line: string; known: boolean } {
  // A part of the app that checks its own surroundings at start (the machine provider's engine) names the variable itself.
  if (error instanceof ConfigError) return { line: error.message, known: true };
  const code = codeOf(error);
  if (phase === 'listen') {
    const where = `${config.host}:${config.port}`;
    if (code === 'EADDRINUSE') return { line: `PORT ${config.port} is already in use on ${config.host} (another process listens at ${where})`, known: true };
    if (code === 'EACCES' || code === 'EPERM') return { line: `PORT ${config.port} may not be listened on by this user (ports below 1024 need privileges)`, known: true };
    if (code === 'EADDRNOTAVAIL') return { line: `HOST ${config.host} is not an address of this machine`, known: true };
    if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_NONAME' || code === 'EAI_FAIL') {
      return { line: `HOST ${config.host} does not resolve to an address (${code})`, known: true };
    }
  } else {
    const sqlite = config.databaseUrl.startsWith('sqlite:');
    const database = databaseOf(config.databaseUrl);
    if (sqlite && (code === 'ERR_SQLITE_ERROR' || (code !== undefined && FILE_CODES.has(code)))) {
      return { line: `DATABASE_URL: cannot open ${database}: ${messageOf(error)}`, known: true };
    }
    if (!sqlite && code !== undefined && (SQLSTATE.test(code) || NETWORK_CODES.has(code))) {
      return { line: `DATABASE_URL: cannot use ${database}: ${messageOf(error) || code}`, known: true };
    }
  }
  return { line: `start-up failed: ${messageOf(error)}`, known: false };
}
