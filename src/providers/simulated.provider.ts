import { escapeHtml } from '../shared/html.ts';
import type { Clock } from '../shared/clock.ts';
import type { CommandResult, MachineProvider, Observation, ProviderMachine, ProviderRun } from './provider.ts';

/**
 * `simulate=<behaviour>` labels make every event reachable through the public API:
 * - `boot-failure`: the boot fails (`machine.error`);
 * - `crash`: the machine runs for one boot time, then fails (`machine.error`);
 * - `platform-stop`: it runs for one boot time, then the host stops it
 *   (`machine.stopped` with reason `platform`);
 * - `slow-host`: every question to the host about it (observe, stop,
 *   destroy, pause, resume) takes SLOW_HOST_MS, as on a host under load.
 * (`balance-empty` is billing's to decide: src/billing/.)
 */
export const SIMULATE_LABEL = 'simulate';
export const SLOW_HOST_MS = 3000;

const AFTER_BOOT: Record<string, Observation> = {
  crash: { status: 'error', reason: 'crash', message: 'The machine crashed.' },
  'platform-stop': { status: 'stopped', reason: 'platform' },
};

/** `exit N` at the end of a command line, after a separator or at its start. */
const EXIT_STATUS = /(?:^|[\s;&|])exit\s+(\d{1,3})\s*$/;

/** `sleep N` anywhere in a command line, N in seconds. */
const SLEEP = /(?:^|[\s;&|])sleep\s+(\d+(?:\.\d+)?)(?=$|[\s;&|])/g;
/** The longest a simulated command takes. */
const LONGEST_SLEEP_MS = 3_600_000;

/** The simulated host executes nothing: `false` and `… exit N` (N ≠ 0) fail, anything else succeeds; the output echoes the command. */
export function simulateCommand(command: string): CommandResult {
  const trimmed = command.trim();
  const exit = EXIT_STATUS.exec(trimmed);
  const exitCode = trimmed === 'false' ? 1 : exit ? Number(exit[1]) : 0;
  return { exitCode, timedOut: false, stdout: command, stderr: '', output: command, truncated: false };
}

/** How long a simulated command takes: the sum of its `sleep N`, at most an hour. */
export function simulatedDuration(command: string): number {
  let total = 0;
  for (const match of command.matchAll(SLEEP)) total += Number(match[1]) * 1000;
  return Math.min(Math.round(total), LONGEST_SLEEP_MS);
}

/** Waits in real time, as a host's work takes it; rejects with the signal's reason when it aborts. */
function hostTime(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(done, Math.max(0, ms));
    function done() {
      signal?.removeEventListener('abort', aborted);
      resolve();
    }
    function aborted() {
      clearTimeout(timer);
      reject(signal!.reason);
    }
    signal?.addEventListener('abort', aborted, { once: true });
  });
}

const STATUS_COLOURS: Record<string, string> = { running: '#1a7f37', starting: '#9a6700', error: '#cf222e' };

/**
 * A host that executes nothing. Its record of a run is the run itself: a
 * command's outcome follows from its text, and it ends `sleep N` seconds
 * after it started, whichever process asks (so a run taken over after its
 * process died ends as it would have).
 */
export function createSimulatedProvider(options: { bootMs: number; clock: Clock; sizes: readonly string[] }): MachineProvider {
  const { bootMs, clock, sizes } = options;
  const slow = async (machine: ProviderMachine) => {
    if (machine.labels[SIMULATE_LABEL] === 'slow-host') await hostTime(SLOW_HOST_MS);
  };
  return {
    name: 'simulated',
    sizes,
    defaultSize: sizes.includes('small') ? 'small' : sizes[0]!,

    async boot(_machine, now) {
      return { checkAt: now + bootMs };
    },

    async observe(machine: ProviderMachine, now: number) {
      await slow(machine);
      const due = machine.statusChangedAt + bootMs;
      if (now < due) return { observation: null, checkAt: due };
      const behaviour = machine.labels[SIMULATE_LABEL];
      if (machine.status === 'starting') {
        if (behaviour === 'boot-failure') {
          return { observation: { status: 'error', reason: 'boot-failure', message: 'The machine failed to boot.' }, checkAt: null };
        }
        return { observation: { status: 'running' }, checkAt: behaviour !== undefined && behaviour in AFTER_BOOT ? now + bootMs : null };
      }
      if (machine.status === 'running' && behaviour !== undefined && behaviour in AFTER_BOOT) {
        return { observation: AFTER_BOOT[behaviour]!, checkAt: null };
      }
      return { observation: null, checkAt: null };
    },

    stop: slow,
    destroy: slow,
    // Nothing runs here to freeze: the service's record of the pause is all there is.
    pause: slow,
    resume: slow,

    // A simulated machine has no disk: its templates and forks hold nothing (sizeBytes 0), and their machines are like any other here.
    templates: {
      async save(machine) {
        await slow(machine);
        return { sizeBytes: 0 };
      },
      async remove() {},
      fork: slow,
      async copy() {},
    },

    async runCommand(machine, run: ProviderRun, signal) {
      const endsAt = run.startedAt + simulatedDuration(run.command);
      // Stopped before the command ended: the host has no outcome to give.
      if (machine.status !== 'running' && clock.now() < endsAt) return null;
      await hostTime(endsAt - clock.now(), signal);
      return simulateCommand(run.command);
    },

    async screen(machine) {
      const colour = STATUS_COLOURS[machine.status] ?? '#57606a';
      const body = `<svg xmlns="http://www.w3.org/2000/svg" width="1024" height="640" viewBox="0 0 1024 640" role="img" aria-label="Screen of ${escapeHtml(machine.name)}">
<rect width="1024" height="640" fill="#0d1117"/>
<text x="512" y="290" fill="#f0f6fc" font-family="sans-serif" font-size="40" text-anchor="middle">${escapeHtml(machine.name)}</text>
<text x="512" y="350" fill="${colour}" font-family="sans-serif" font-size="28" text-anchor="middle">${escapeHtml(machine.status)}</text>
<text x="512" y="600" fill="#8b949e" font-family="sans-serif" font-size="16" text-anchor="middle">simulated machine ${escapeHtml(machine.id)}</text>
</svg>`;
      return { contentType: 'image/svg+xml', body: Buffer.from(body, 'utf8'), width: 1024, height: 640 };
    },

    commandsNote: 'The simulated machine executes nothing: the output echoes the command; `false` or a command ending in `exit N` (N ≠ 0) fails, and `sleep N` takes N seconds.',
  };
}
