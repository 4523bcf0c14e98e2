import type { FastifyInstance } from 'fastify';
import type { Tx } from '../db/transaction.ts';
import type { Deps } from '../deps.ts';
import { MINUTE, SECOND, type Timer } from '../shared/clock.ts';
import { machineIdleJob } from './job-types.ts';
import { recordActivity, type MachineRow } from './machines.repository.ts';

/**
 * What keeps a machine awake (idle stop), in one place.
 *
 * A machine is active while someone uses it, through the service, and while
 * a run of it is unfinished. Counted as activity:
 *
 * - a request answered successfully (2xx or 3xx) on a route of ACTIVITY_ROUTES:
 *   the machine's MCP endpoint, a run started, files, a process started, its
 *   output read, input or a signal sent to it, a screenshot. A refused request (401, 403, 404,
 *   400…) counts not: it may come from anyone who knows the machine's id.
 * - traffic through a long connection, either way: a terminal's keystrokes and
 *   output, control of the screen, a live view's stream, a preview's requests,
 *   its WebSockets and its streamed answers; a live view's page and pictures.
 * - a run that is pending or running (the idle check asks the database), and a
 *   run's end (recorded as activity, so the idle time starts when it ended).
 * - the machine's start or resume, and a claim from a pool (the idle time counts
 *   from there).
 *
 * Not activity: anything in the machine that no client is talking to (a
 * background process, a server nobody requests, a cron job of its own), and
 * reading or managing the machine's record (GET and PATCH of the machine, its
 * runs list, the list of its processes and their states, its events, its usage
 * graph, start/stop/pause, tokens, preview settings, live-view links). So an open dashboard page on the
 * record or the usage tab does not keep a machine awake; a terminal that
 * shows a program's output does, as long as output flows.
 *
 * Cost: activity is recorded in memory and written to the machine's row at
 * most once every ACTIVITY_WRITE_MS per machine and process: the first touch
 * at once (so a request is recorded before it is answered), later ones within
 * the window once at its end. A terminal streaming megabytes costs one
 * UPDATE every 10 s, and the idle stop can be early by at most that window
 * only if the process dies holding an unwritten touch. The write does not bump
 * the machine's version, so no state change loses its compare-and-set to a
 * keystroke; the idle stop checks the activity itself (IdleGuard).
 */

/** How often one process writes one machine's activity at most. */
export const ACTIVITY_WRITE_MS = 10 * SECOND;

/** `autoStopMinutes` bounds and default. */
export const AUTO_STOP_MINUTES = { min: 0, max: 10_080, default: 15 } as const;

/** Routes (as Fastify names them) whose successful answers count as activity, by method; `*`: any method. */
const ACTIVITY_ROUTES: Record<string, readonly string[]> = {
  '/api/machines/:id/mcp': ['*'],
  '/api/machines/:id/runs': ['POST'],
  '/api/machines/:id/files': ['*'],
  // Starting one; listing them or reading one's state is not (the dashboard polls the list while one runs: an
  // open page would keep awake a machine whose background process nobody uses).
  '/api/machines/:id/processes': ['POST'],
  '/api/machines/:id/processes/:procId/output': ['*'],
  '/api/machines/:id/processes/:procId/input': ['*'],
  '/api/machines/:id/processes/:procId/signal': ['*'],
  '/api/machines/:id/screenshot': ['*'],
};

/** Whether a request to this route (Fastify's pattern) uses the machine. */
export function countsAsActivity(method: string, routeUrl: string | undefined): boolean {
  const methods = routeUrl === undefined ? undefined : ACTIVITY_ROUTES[routeUrl];
  return methods !== undefined && (methods.includes('*') || methods.includes(method));
}

export interface MachineActivity {
  /** The machine is used now. Resolves once what this touch writes (if anything) is written. */
  touch(machineId: string): Promise<void>;
  /** For a stream: a function to call on each chunk or message (cheap: a map lookup until the window ends). */
  traffic(machineId: string): () => void;
  /** Writes what is pending, and waits for writes under way (at shutdown). */
  flush(): Promise<void>;
}

const WRITTEN: Promise<void> = Promise.resolve();

interface Window {
  /** The latest touch not yet written; null when none came since the last write. */
  latest: number | null;
  timer: Timer;
}

export function createMachineActivity(deps: Pick<Deps, 'db' | 'clock' | 'logger'>): MachineActivity {
  const windows = new Map<string, Window>();
  const writing = new Set<Promise<void>>();
  const write = (machineId: string, at: number) => {
    const written = recordActivity(deps.db, machineId, at)
      .catch((err: unknown) => deps.logger.warn({ err, machineId }, 'could not record a machine’s activity'))
      .finally(() => writing.delete(written));
    writing.add(written);
    return written;
  };

  // Leading and trailing: the first touch writes at once and opens a window; touches within it are written once at its end.
  const open = (machineId: string): Window => {
    const window: Window = { latest: null, timer: deps.clock.setTimeout(() => close(machineId), ACTIVITY_WRITE_MS) };
    windows.set(machineId, window);
    return window;
  };
  const close = (machineId: string) => {
    const window = windows.get(machineId);
    windows.delete(machineId);
    if (window?.latest == null) return;
    open(machineId);
    void write(machineId, window.latest);
  };

  // A plain function, not an async one: a stream calls it for every chunk, and within a window it only notes the time.
  /** Notes a use now: the write it starts when it opens a window, or null within one. */
  const record = (machineId: string): Promise<void> | null => {
    const now = deps.clock.now();
    const window = windows.get(machineId);
    if (window !== undefined) {
      window.latest = now;
      return null;
    }
    open(machineId);
    return write(machineId, now);
  };

  return {
    touch: (machineId) => record(machineId) ?? WRITTEN,
    traffic: (machineId) => () => void record(machineId),
    async flush() {
      const pending = [...windows].filter(([, window]) => window.latest !== null);
      for (const [, window] of windows) window.timer.clear();
      windows.clear();
      for (const [machineId, window] of pending) void write(machineId, window.latest!);
      await Promise.all([...writing]);
    },
  };
}

/** Counts the successful answers of ACTIVITY_ROUTES; call before the machines' routes are registered. */
export function recordRequestActivity(app: FastifyInstance, activity: MachineActivity): void {
  app.addHook('onSend', async (request, reply) => {
    if (reply.statusCode >= 400 || !countsAsActivity(request.method, request.routeOptions.url)) return;
    const machineId = (request.params as { id?: unknown } | undefined)?.id;
    if (typeof machineId === 'string') await activity.touch(machineId);
  });
}

/**
 * When the machine has been idle for its `autoStopMinutes`, as far as its row
 * says: counted from its last recorded activity, or from when it became
 * running (a start, a resume), whichever is later. Null: it never idles.
 */
export function idleDeadline(row: Pick<MachineRow, 'auto_stop_minutes' | 'last_active_at' | 'status_changed_at' | 'pool_id'>): number | null {
  // A warm machine waiting in its pool is kept booted on purpose.
  if (row.auto_stop_minutes <= 0 || row.pool_id !== null) return null;
  return Math.max(row.last_active_at ?? 0, row.status_changed_at) + row.auto_stop_minutes * MINUTE;
}

/**
 * The machine's idle check, due when it would have idled for its
 * `autoStopMinutes` if nothing happens meanwhile (the check itself looks again
 * at what happened); none for a machine that never idles or is not running.
 */
export async function scheduleIdleCheck(deps: Deps, tx: Tx, row: MachineRow): Promise<void> {
  const deadline = row.status === 'running' ? idleDeadline(row) : null;
  if (deadline === null) await deps.jobs.cancel(tx, machineIdleJob, row.id);
  else await deps.jobs.schedule(tx, machineIdleJob, row.id, { machineId: row.id }, deadline);
}
