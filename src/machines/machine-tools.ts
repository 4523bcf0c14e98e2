import type { McpServer } from '@modelcontextprotocol/server';
import type { FastifyBaseLogger } from 'fastify';
import * as z from 'zod';
import { defineTool } from '../mcp/tools.ts';
import type { MachineProvider } from './provider.ts';
import { RUN_LIMITS } from './runs.schemas.ts';
import type { ManualRun } from './runs.service.ts';

/** What the machine's MCP tools can do, whatever the provider. */
export interface MachineToolContext {
  logger: FastifyBaseLogger;
  /** The machine as the HTTP API shows it, read afresh. */
  describe(): Promise<object>;
  /**
   * Runs a command as a manual run (events, stopAfter) and answers the run as
   * the HTTP API shows it once it has finished (or after the provider's
   * maxRunMs, as it then is).
   * @throws AppError 403 forbidden for stopAfter when the caller holds only the machine token: spec 5 rule 2.
   */
  runCommand(run: ManualRun): Promise<object>;
}

// The same limits as the HTTP schemas (runs.schemas.ts), in zod for the MCP SDK.
export const CommandArgs = {
  command: z.string().min(1).max(RUN_LIMITS.command).describe('The command line, run by /bin/sh -c as root'),
  cwd: z.string().min(1).max(RUN_LIMITS.path).regex(/^\/[^\0]*$/).optional().describe('Absolute working directory (default /root)'),
  env: z
    .record(z.string().regex(new RegExp(RUN_LIMITS.envNamePattern)).max(RUN_LIMITS.envName), z.string().max(RUN_LIMITS.envValue))
    .refine((env) => Object.keys(env).length <= RUN_LIMITS.envKeys, `at most ${RUN_LIMITS.envKeys} variables`)
    .optional()
    .describe('Variables added to the environment'),
  timeoutMs: z.number().int().min(RUN_LIMITS.timeoutMs.min).max(RUN_LIMITS.timeoutMs.max).optional().describe('Killed past this (default 600000)'),
};

/** The tools of a machine's own MCP endpoint (CONTRACT 8 and 15). */
export function registerMachineTools(server: McpServer, context: MachineToolContext, provider: MachineProvider): void {
  defineTool(server, context.logger, 'machine_info', {
    description: 'This machine: id, name, status, size, externalId, labels, expiresAt, createdAt.',
    input: z.strictObject({}),
    annotations: { readOnlyHint: true },
  }, () => context.describe());

  defineTool(server, context.logger, 'run_command', {
    description:
      'Runs a shell command on this machine (a manual run), waits for it and returns the finished run: exitCode, stdout, stderr, ' +
      `output (both, in order), timedOut.${provider.commandsNote ? ` ${provider.commandsNote}` : ''}`,
    input: z.strictObject({
      ...CommandArgs,
      stopAfter: z.boolean().optional().describe("Stop the machine when the run ends (the owner's API key only: a machine token cannot stop its machine)"),
    }),
  }, (args) => context.runCommand({ ...args, stopAfter: args.stopAfter ?? false }));
}
