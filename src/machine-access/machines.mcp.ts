import * as z from 'zod';
import type { PlatformToolRegistrar } from '../mcp/mcp.plugin.ts';
import { defineTool, withProgress, type ToolWaitOptions } from '../mcp/tools.ts';
import { toPage } from '../http/pagination.ts';
import { awaitRun, getRun, runAndWait } from '../runs/runs.service.ts';
import { createLiveView } from './live-view.service.ts';
import { CommandArgs, longRunNote, RunId, RunWaitMs } from './machine-tools.ts';
import { toMachineView } from '../machines/machines.repository.ts';
import { MACHINE_LIMITS } from '../machines/machines.schemas.ts';
import { createMachine, destroyMachine, getMachineRow, listMachines, rotateMachineToken, startMachine, stopMachine } from '../machines/machines.service.ts';
import { changeMachine } from '../machines/network.service.ts';
import { AUTO_STOP_MINUTES } from '../machines/activity.ts';
import { MACHINE_STATUSES } from '../machines/machines.tables.ts';
import { pauseMachine, resumeMachine } from '../machines/pause.service.ts';
import { SCREEN_LIMITS } from '../providers/screen-size.ts';
import { FORK_LIMITS, forkMachine } from '../machines/forks.service.ts';
import { createTemplate } from '../machines/templates.service.ts';
import type { MachineProvider } from '../providers/provider.ts';

// The same limits as the HTTP schemas (machines.schemas.ts, runs.schemas.ts), in zod for the MCP SDK.
const MachineId = z.string().min(1).max(MACHINE_LIMITS.id).describe('Machine id (mch_…)');
const ById = z.strictObject({ id: MachineId });
const Status = z.enum(MACHINE_STATUSES);
const NetworkPolicy = z
  .strictObject({ internet: z.boolean(), allow: z.array(z.string().min(1).max(253)).max(50).optional(), deny: z.array(z.string().min(1).max(18)).max(50).optional() })
  .describe('The way out: internet true opens every public address except deny (IPv4 CIDRs); false only what allow lists (IPv4 CIDRs, domains, *.example.org). At most 50 entries');
const AutoStopMinutes = z
  .number()
  .int()
  .min(AUTO_STOP_MINUTES.min)
  .max(AUTO_STOP_MINUTES.max)
  .describe(`Idle stop: minutes without activity before the machine is stopped (reason idle); 0: never; default ${AUTO_STOP_MINUTES.default}. A background process alone is not activity`);
const Labels = z
  .record(z.string().regex(new RegExp(MACHINE_LIMITS.labelKeyPattern)), z.string().max(MACHINE_LIMITS.labelValue))
  .refine((labels) => Object.keys(labels).length <= MACHINE_LIMITS.labels, `at most ${MACHINE_LIMITS.labels} labels`);

/** The platform MCP server's machine tools: the HTTP machine API, tool for route, same JSON. */
export function machinePlatformTools(provider: MachineProvider, wait: Readonly<ToolWaitOptions>): PlatformToolRegistrar {
  return (server, { deps, accountId }) => {
    const logger = deps.logger;

    defineTool(server, logger, 'machines_list', {
      description: "Lists the account's machines, newest first, as {data, nextCursor}.",
      input: z.strictObject({
        limit: z.number().int().min(1).max(100).optional(),
        cursor: z.string().regex(/^[a-z]+_[0-9a-z]{26}$/).optional(),
        status: Status.optional(),
      }),
      annotations: { readOnlyHint: true },
    }, async ({ limit = 50, cursor, status }) => toPage(await listMachines(deps, accountId, { limit: limit + 1, cursor, status }), limit));

    defineTool(server, logger, 'machine_get', {
      description: 'One machine by id.',
      input: ById,
      annotations: { readOnlyHint: true },
    }, async ({ id }) => toMachineView(await getMachineRow(deps, accountId, id)));

    defineTool(server, logger, 'machine_create', {
      description:
        'Creates and boots a machine (or claims a warm one with `pool`). The answer carries `mcpToken`, shown only once: ' +
        'the machine token for the machine’s own MCP endpoint.',
      input: z.strictObject({
        name: z.string().min(1).max(MACHINE_LIMITS.name),
        size: z.string().min(1).max(MACHINE_LIMITS.size).optional().describe(`One of ${provider.sizes.join(', ')}`),
        externalId: z.string().max(MACHINE_LIMITS.externalId).optional(),
        labels: Labels.optional(),
        expiresAt: z.iso.datetime({ offset: true }).optional().describe('ISO 8601; must be in the future'),
        onExpire: z.enum(['stop', 'destroy']).optional(),
        pool: z.string().min(1).max(MACHINE_LIMITS.poolRef).optional().describe('Warm pool name or id'),
        screen: z
          .strictObject({
            width: z.number().int().min(SCREEN_LIMITS.min.width).max(SCREEN_LIMITS.max.width),
            height: z.number().int().min(SCREEN_LIMITS.min.height).max(SCREEN_LIMITS.max.height),
          })
          .optional()
          .describe('The display size (default 1280×800)'),
        env: z
          .record(z.string().regex(new RegExp(MACHINE_LIMITS.envNamePattern)).max(MACHINE_LIMITS.envName), z.string())
          .optional()
          .describe(`Environment variables of every command, process and terminal of the machine (at most ${MACHINE_LIMITS.envVariables}, values up to 32 KiB); stored encrypted, never shown again`),
        image: z.string().min(1).max(50).optional().describe('An image the operator offers (GET /api/images); default: the base image'),
        autoStopMinutes: AutoStopMinutes.optional(),
        network: NetworkPolicy.optional(),
        template: z.string().min(1).max(MACHINE_LIMITS.templateRef).optional().describe('A template (id or name) to start from, with its files; not with image or pool'),
      }),
    }, (input) => createMachine(deps, provider, accountId, input));

    defineTool(server, logger, 'machine_update', {
      description: "Changes a machine's settings (as PATCH /api/machines/{id}): autoStopMinutes, and its network policy (applied at once where it runs); what is left out stays.",
      input: z.strictObject({ id: MachineId, autoStopMinutes: AutoStopMinutes.optional(), network: NetworkPolicy.optional() }),
    }, ({ id, ...changes }) => changeMachine(deps, provider, accountId, id, changes));

    defineTool(server, logger, 'machine_start', {
      description: 'Boots a stopped machine; machine.started follows once it is up.',
      input: ById,
    }, ({ id }) => startMachine(deps, provider, accountId, id));

    defineTool(server, logger, 'machine_stop', {
      description: 'Turns a machine off, keeping its state.',
      input: ById,
    }, ({ id }) => stopMachine(deps, provider, accountId, id));

    defineTool(server, logger, 'machine_pause', {
      description: 'Freezes a running machine with its memory and processes (machine.paused); it is billed at the paused price until resumed, and its own tools answer invalid_state meanwhile.',
      input: ById,
    }, ({ id }) => pauseMachine(deps, provider, accountId, id));

    defineTool(server, logger, 'machine_resume', {
      description: 'Lets a paused machine go on from where it was frozen (machine.resumed).',
      input: ById,
    }, ({ id }) => resumeMachine(deps, provider, accountId, id));

    defineTool(server, logger, 'template_create', {
      description:
        'Saves a machine’s disk (running: frozen for the copy, then going on; paused; or stopped) as a template of the account, as {id, name, sizeBytes, createdAt, sourceMachineId}. ' +
        'machine_create {template} then starts machines with its files. At most 20 per account.',
      input: z.strictObject({ machineId: MachineId, name: z.string().min(1).max(MACHINE_LIMITS.name) }),
    }, (input) => createTemplate(deps, provider, accountId, input));

    defineTool(server, logger, 'machine_fork', {
      description:
        `Makes count (${FORK_LIMITS.min}–${FORK_LIMITS.max}) new machines from a machine’s disk at once, as {data: [machines]}: each with the source’s files, size, labels, image and environment, ` +
        'booting (machine.created follows), its mcpToken shown only here.',
      input: z.strictObject({ id: MachineId, count: z.number().int().min(FORK_LIMITS.min).max(FORK_LIMITS.max), name: z.string().min(1).max(MACHINE_LIMITS.name).optional() }),
    }, async ({ id, count, name }) => ({ data: await forkMachine(deps, provider, accountId, id, { count, name }) }));

    defineTool(server, logger, 'machine_destroy', {
      description: 'Destroys a machine for good.',
      input: ById,
      annotations: { destructiveHint: true },
    }, ({ id }) => destroyMachine(deps, provider, accountId, id));

    defineTool(server, logger, 'machine_rotate_token', {
      description: 'Issues a new machine token (mcpToken); the previous one stops working.',
      input: ById,
    }, ({ id }) => rotateMachineToken(deps, accountId, id));

    defineTool(server, logger, 'machine_run_command', {
      description: `Runs a command on a running machine (a manual run), waits for it and returns the finished run. ${longRunNote('machine_run_get', 'machine_run_wait')}`,
      input: z.strictObject({ id: MachineId, ...CommandArgs, stopAfter: z.boolean().optional() }),
    }, ({ id, stopAfter, ...run }, call) =>
      withProgress(call, wait.progressIntervalMs, runAndWait(deps, provider, accountId, id, { ...run, stopAfter: stopAfter ?? false }, { waitMs: wait.answerDeadlineMs, signal: call.signal })),
    );

    defineTool(server, logger, 'machine_run_get', {
      description: 'One run of any of the account’s machines by id, as GET /api/runs/{id} shows it.',
      input: z.strictObject({ id: RunId }),
      annotations: { readOnlyHint: true },
    }, ({ id }) => getRun(deps, accountId, id));

    defineTool(server, logger, 'machine_run_wait', {
      description: 'Waits for a run to finish, at most waitMs, and returns it: finished, or as it is then (with its runId).',
      input: z.strictObject({ id: RunId, waitMs: RunWaitMs }),
      annotations: { readOnlyHint: true },
    }, ({ id, waitMs }, call) => {
      const waitFor = Math.min(waitMs ?? wait.answerDeadlineMs, wait.answerDeadlineMs);
      return withProgress(call, wait.progressIntervalMs, awaitRun(deps, accountId, undefined, id, { waitMs: waitFor, signal: call.signal }));
    });

    defineTool(server, logger, 'machine_live_view', {
      description: "Creates a 15-minute link to the machine's screen, as {url, expiresAt}.",
      input: ById,
    }, ({ id }) => createLiveView(deps, accountId, id));
  };
}
