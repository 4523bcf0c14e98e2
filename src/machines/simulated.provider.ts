import * as z from 'zod';
import { escapeHtml } from '../shared/html.ts';
import { defineTool } from '../mcp/tools.ts';
import { RUN_LIMITS } from './runs.schemas.ts';
import type { CommandResult, MachineProvider, Observation, ProviderMachine } from './provider.ts';

/**
 * `simulate=<behaviour>` labels make every event reachable through the public API:
 * - `boot-failure`: the boot fails (`machine.error`);
 * - `crash`: the machine runs for one boot time, then fails (`machine.error`);
 * - `platform-stop`: it runs for one boot time, then the host stops it
 *   (`machine.stopped` with reason `platform`).
 * (`balance-empty` is billing's to decide: src/billing/.)
 */
export const SIMULATE_LABEL = 'simulate';

const SIZES = ['small', 'medium', 'large'] as const;

const AFTER_BOOT: Record<string, Observation> = {
  crash: { status: 'error', reason: 'crash', message: 'The machine crashed.' },
  'platform-stop': { status: 'stopped', reason: 'platform' },
};

/** `exit N` at the end of a command line, after a separator or at its start. */
const EXIT_STATUS = /(?:^|[\s;&|])exit\s+(\d{1,3})\s*$/;

/** The simulated host executes nothing: `false` and `… exit N` (N ≠ 0) fail, anything else succeeds; the output echoes the command. */
export function simulateCommand(command: string): CommandResult {
  const trimmed = command.trim();
  const exit = EXIT_STATUS.exec(trimmed);
  const exitCode = trimmed === 'false' ? 1 : exit ? Number(exit[1]) : 0;
  return { exitCode, output: command };
}

const STATUS_COLOURS: Record<string, string> = { running: '#1a7f37', starting: '#9a6700', error: '#cf222e' };

export function createSimulatedProvider(options: { bootMs: number }): MachineProvider {
  const { bootMs } = options;
  return {
    name: 'simulated',
    sizes: SIZES,
    defaultSize: 'small',
    // Commands run instantly here; a minute is what the synchronous tools wait for one.
    maxRunMs: 60_000,

    async boot(_machine, now) {
      return { checkAt: now + bootMs };
    },

    async observe(machine: ProviderMachine, now: number) {
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

    async stop() {},
    async destroy() {},

    async runCommand(_machine, command) {
      return simulateCommand(command);
    },

    async screen(machine) {
      const colour = STATUS_COLOURS[machine.status] ?? '#57606a';
      const body = `<svg xmlns="http://www.w3.org/2000/svg" width="1024" height="640" viewBox="0 0 1024 640" role="img" aria-label="Screen of ${escapeHtml(machine.name)}">
<rect width="1024" height="640" fill="#0d1117"/>
<text x="512" y="290" fill="#f0f6fc" font-family="sans-serif" font-size="40" text-anchor="middle">${escapeHtml(machine.name)}</text>
<text x="512" y="350" fill="${colour}" font-family="sans-serif" font-size="28" text-anchor="middle">${escapeHtml(machine.status)}</text>
<text x="512" y="600" fill="#8b949e" font-family="sans-serif" font-size="16" text-anchor="middle">simulated machine ${escapeHtml(machine.id)}</text>
</svg>`;
      return { contentType: 'image/svg+xml', body };
    },

    registerTools(server, context) {
      defineTool(server, context.logger, 'machine_info', {
        description: 'This machine: id, name, status, size, externalId, labels, expiresAt, createdAt.',
        input: z.strictObject({}),
        annotations: { readOnlyHint: true },
      }, () => context.describe());

      defineTool(server, context.logger, 'run_command', {
        description:
          'Runs a shell command on this machine (a manual run), waits for it and returns the finished run. The simulated machine executes nothing: ' +
          'the output echoes the command; `false` or a command ending in `exit N` (N ≠ 0) fails.',
        input: z.strictObject({
          command: z.string().min(1).max(RUN_LIMITS.command).describe('The command line'),
          stopAfter: z.boolean().optional().describe("Stop the machine when the run ends (the owner's API key only: a machine token cannot stop its machine)"),
        }),
      }, (args) => context.runCommand(args.command, args.stopAfter ?? false));
    },
  };
}
