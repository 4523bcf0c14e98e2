import { Type } from 'typebox';
import { IdParamsSchema } from '../http/schemas.ts';
import type { PlatformToolRegistrar } from '../mcp/mcp.plugin.ts';
import { defineTool, withProgress, type ToolWaitOptions } from '../mcp/tools.ts';
import { toPage } from '../http/pagination.ts';
import { awaitRun, getRun, runAndWait } from '../runs/runs.service.ts';
import { createLiveView } from './live-view.service.ts';
import { longRunNote, RunGetInput, RunWaitInput } from './machine-tools.ts';
import { toMachineView } from '../machines/machines.repository.ts';
import { CreateMachineBody, ListMachinesQuery, UpdateMachineBody } from '../machines/machines.schemas.ts';
import { CreateTemplateBody, ForkBody } from '../machines/templates.schemas.ts';
import { CreateRunBody } from '../runs/runs.schemas.ts';
import { createMachine, destroyMachine, getMachineRow, listMachines, rotateMachineToken, startMachine, stopMachine } from '../machines/machines.service.ts';
import { changeMachine } from '../machines/network.service.ts';
import { pauseMachine, resumeMachine } from '../machines/pause.service.ts';
import { FORK_LIMITS, forkMachine } from '../machines/forks.service.ts';
import { createTemplate } from '../machines/templates.service.ts';
import type { MachineProvider } from '../providers/provider.ts';

// Each input is the HTTP route's schema, or built from its fields (machines.schemas.ts, templates.schemas.ts,
// runs.schemas.ts): a limit is written once, and a tool cannot drift from its route.
const strict = { additionalProperties: false } as const;
const MachineId = { ...IdParamsSchema.properties.id, description: 'Machine id (mch_…)' };
const ById = Type.Object({ id: MachineId }, strict);
const UpdateInput = Type.Object({ id: MachineId, ...UpdateMachineBody.properties }, strict);
const ForkInput = Type.Object({ id: MachineId, ...ForkBody.properties }, strict);
const RunCommandInput = Type.Object({ id: MachineId, ...CreateRunBody.properties }, strict);

/** POST /api/machines's body, its size described by the sizes this provider has. */
function createInput(provider: MachineProvider) {
  const { size } = CreateMachineBody.properties;
  return Type.Object({ ...CreateMachineBody.properties, size: Type.Optional({ ...size, description: `One of ${provider.sizes.join(', ')}` }) }, strict);
}

/** The platform MCP server's machine tools: the HTTP machine API, tool for route, same JSON. */
export function machinePlatformTools(provider: MachineProvider, wait: Readonly<ToolWaitOptions>): PlatformToolRegistrar {
  const CreateInput = createInput(provider);
  return (server, { deps, accountId }) => {
    const logger = deps.logger;

    defineTool(server, logger, 'machines_list', {
      description: "Lists the account's machines, newest first, as {data, nextCursor}.",
      input: ListMachinesQuery,
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
      input: CreateInput,
    }, (input) => createMachine(deps, provider, accountId, input));

    defineTool(server, logger, 'machine_update', {
      description: "Changes a machine's settings (as PATCH /api/machines/{id}): autoStopMinutes, and its network policy (applied at once where it runs); what is left out stays.",
      input: UpdateInput,
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
      input: CreateTemplateBody,
    }, (input) => createTemplate(deps, provider, accountId, input));

    defineTool(server, logger, 'machine_fork', {
      description:
        `Makes count (${FORK_LIMITS.min}–${FORK_LIMITS.max}) new machines from a machine’s disk at once, as {data: [machines]}: each with the source’s files, size, labels, image and environment, ` +
        'booting (machine.created follows), its mcpToken shown only here.',
      input: ForkInput,
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
      input: RunCommandInput,
    }, ({ id, stopAfter, ...run }, call) =>
      withProgress(call, wait.progressIntervalMs, runAndWait(deps, provider, accountId, id, { ...run, stopAfter: stopAfter ?? false }, { waitMs: wait.answerDeadlineMs, signal: call.signal })),
    );

    defineTool(server, logger, 'machine_run_get', {
      description: 'One run of any of the account’s machines by id, as GET /api/runs/{id} shows it.',
      input: RunGetInput,
      annotations: { readOnlyHint: true },
    }, ({ id }) => getRun(deps, accountId, id));

    defineTool(server, logger, 'machine_run_wait', {
      description: 'Waits for a run to finish, at most waitMs, and returns it: finished, or as it is then (with its runId).',
      input: RunWaitInput,
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
