import type { McpServer } from '@modelcontextprotocol/server';
import type { FastifyBaseLogger } from 'fastify';
import { Type } from 'typebox';
import type { Deps } from '../deps.ts';
import { invalidRequest } from '../http/errors.ts';
import { defineContentTool, defineTool, imageResult, NoInput, TOOL_ANSWER_DEADLINE_MS, withProgress, type ToolWaitOptions } from '../mcp/tools.ts';
import { ComputerInput } from '../providers/computer-use.ts';
import { actOnScreen, takeScreenshot } from './screens.service.ts';
import {
  deletePath,
  listDirectory,
  listProcesses,
  readPath,
  readProcessOutput,
  sendProcessInput,
  signalProcess,
  startProcess,
  TOOL_FILE_LIMIT,
  writeFile,
} from './machine-access.service.ts';
import type { MachineProvider } from '../providers/provider.ts';
import { CreateRunBody } from '../runs/runs.schemas.ts';
import { DeleteFileQuery, PathQuery, ProcessId, ProcessInputBody, ProcessOutputQuery, ProcessSignalBody, StartProcessBody } from './machine-access.schemas.ts';
import { awaitRun, getRun, type ManualRun, type RunWait, type WaitedRun } from '../runs/runs.service.ts';

/** What the machine's MCP tools can do, whatever the provider. */
export interface MachineToolContext {
  deps: Deps;
  accountId: string;
  machineId: string;
  logger: FastifyBaseLogger;
  /** How long the tools wait before they answer, and how often they report progress. */
  wait: Readonly<ToolWaitOptions>;
  /** The machine as the HTTP API shows it, read afresh. */
  describe(): Promise<object>;
  /**
   * Runs a command as a manual run (events, stopAfter) and answers the run as
   * the HTTP API shows it once it has finished, or as it is when the wait ends (with its runId).
   * @throws AppError 403 forbidden for stopAfter when the caller holds only the machine token: a machine token cannot decide how long its own machine lives.
   */
  runCommand(run: ManualRun, wait: RunWait): Promise<WaitedRun>;
}

const strict = { additionalProperties: false } as const;

// Each input is the HTTP route's schema (runs.schemas.ts, machine-access.schemas.ts), or built from its fields:
// a limit is written once, and a tool cannot drift from its route (test/mcp/tool-schemas.test.ts checks it too).
const RunId = Type.String({ pattern: '^run_[0-9a-z]{26}$', description: 'The run id (run_…) run_command answered' });
/** run_wait's and machine_run_wait's longest wait: no more than a tool may take to answer. */
const RunWaitMs = Type.Optional(
  Type.Integer({ minimum: 0, maximum: TOOL_ANSWER_DEADLINE_MS, description: `How long to wait for the run to finish, at most ${TOOL_ANSWER_DEADLINE_MS} (the default)` }),
);
export const RunWaitInput = Type.Object({ id: RunId, waitMs: RunWaitMs }, strict);
export const RunGetInput = Type.Object({ id: RunId }, strict);

/** The same sentence in both servers' run_command: what a run that outlasts the tool's answer gives. */
export const longRunNote = (getTool: string, waitTool: string) =>
  `A run still going after ${TOOL_ANSWER_DEADLINE_MS / 1000} s is answered as it is then, {status: "running", runId, …}: it goes on; ` +
  `read it with ${getTool} or wait for it with ${waitTool}. With a progressToken, progress notifications come every few seconds meanwhile.`;

const RunCommandInput = Type.Object(
  {
    ...CreateRunBody.properties,
    stopAfter: Type.Optional({ ...CreateRunBody.properties.stopAfter, description: "Stop the machine when the run ends (the owner's API key only: a machine token cannot stop its machine)" }),
  },
  strict,
);
const ProcessOutputInput = Type.Object({ id: ProcessId, ...ProcessOutputQuery.properties }, strict);
const ProcessInputInput = Type.Object({ id: ProcessId, ...ProcessInputBody.properties }, strict);
const ProcessSignalInput = Type.Object({ id: ProcessId, ...ProcessSignalBody.properties }, strict);
const Encoding = Type.Optional(Type.Enum(['utf8', 'base64'], { type: 'string', description: 'utf8 (default) for text, base64 for any bytes' }));
const FileReadInput = Type.Object({ ...PathQuery.properties, encoding: Encoding }, strict);
const FileWriteInput = Type.Object(
  {
    ...PathQuery.properties,
    content: Type.String({ maxLength: Math.ceil((TOOL_FILE_LIMIT * 4) / 3) + 4 }),
    encoding: Encoding,
    append: Type.Optional(Type.Boolean({ description: 'Add to the end instead of replacing' })),
  },
  strict,
);

/** The tools of a machine's own MCP endpoint. */
export function registerMachineTools(server: McpServer, context: MachineToolContext, provider: MachineProvider): void {
  defineTool(server, context.logger, 'machine_info', {
    description: 'This machine: id, name, status, size, externalId, labels, expiresAt, createdAt.',
    input: NoInput,
    annotations: { readOnlyHint: true },
  }, () => context.describe());

  const { deps, accountId, machineId, logger, wait } = context;
  defineTool(server, logger, 'run_command', {
    description:
      'Runs a shell command on this machine (a manual run), waits for it and returns the finished run: exitCode, stdout, stderr, ' +
      `output (both, in order), timedOut. ${longRunNote('run_get', 'run_wait')}${provider.commandsNote ? ` ${provider.commandsNote}` : ''}`,
    input: RunCommandInput,
  }, (args, call) =>
    withProgress(call, wait.progressIntervalMs, context.runCommand({ ...args, stopAfter: args.stopAfter ?? false }, { waitMs: wait.answerDeadlineMs, signal: call.signal })),
  );

  defineTool(server, logger, 'run_get', {
    description: 'One run of this machine by id, as it is now (status pending, running, succeeded or failed).',
    input: RunGetInput,
    annotations: { readOnlyHint: true },
  }, ({ id }) => getRun(deps, accountId, id, machineId));

  defineTool(server, logger, 'run_wait', {
    description: 'Waits for a run of this machine to finish, at most waitMs, and returns it: finished, or as it is then (with its runId).',
    input: RunWaitInput,
    annotations: { readOnlyHint: true },
  }, ({ id, waitMs }, call) => {
    const waitFor = Math.min(waitMs ?? wait.answerDeadlineMs, wait.answerDeadlineMs);
    return withProgress(call, wait.progressIntervalMs, awaitRun(deps, accountId, machineId, id, { waitMs: waitFor, signal: call.signal }));
  });

  if (provider.processes) registerProcessTools(server, context, provider);
  if (provider.files) registerFileTools(server, context, provider);
  // The simulated provider's placeholder picture is no screen to act on: its endpoint keeps only machine_info and the run tools.
  if (provider.computer) registerScreenTools(server, context, provider);
}

function registerScreenTools(server: McpServer, context: MachineToolContext, provider: MachineProvider): void {
  const { deps, accountId, machineId, logger } = context;

  defineContentTool(server, logger, 'screenshot', {
    description: "A picture of this machine's screen (PNG), with its width and height.",
    input: NoInput,
    annotations: { readOnlyHint: true },
  }, async () => {
    const shot = await takeScreenshot(deps, provider, accountId, machineId);
    return imageResult(shot, { width: shot.width, height: shot.height });
  });

  defineContentTool(server, logger, 'computer', {
    description:
      "Uses this machine's screen with mouse and keyboard, as Anthropic's computer-use tool does: key, type, mouse_move, left_click, right_click, " +
      'middle_click, double_click, triple_click, left_click_drag, left_mouse_down, left_mouse_up, scroll, hold_key, wait, screenshot, cursor_position. ' +
      'Coordinates are [x, y] pixels from the top left. Answers a screenshot after the action (cursor_position answers {x, y}).',
    input: ComputerInput,
  }, async (input) => {
    const answer = await actOnScreen(deps, provider, accountId, machineId, input);
    if ('cursor' in answer) return { content: [{ type: 'text', text: JSON.stringify(answer.cursor) }], structuredContent: answer.cursor };
    return imageResult(answer.screenshot, { width: answer.screenshot.width, height: answer.screenshot.height });
  });
}

function registerProcessTools(server: McpServer, context: MachineToolContext, provider: MachineProvider): void {
  const { deps, accountId, machineId, logger } = context;

  defineTool(server, logger, 'process_start', {
    description: 'Starts a background process (/bin/sh -c, as root) and answers its id at once; read its output with process_output. It runs until it ends or the machine stops.',
    input: StartProcessBody,
  }, (args) => startProcess(deps, provider, accountId, machineId, args));

  defineTool(server, logger, 'process_output', {
    description:
      "A process's stdout and stderr from `offset` on (at most 1 MiB), waiting up to waitMs for more; answers the next offset, whether it still runs and its exit code. " +
      'The machine keeps the last 64 MiB of output: `dropped` counts bytes skipped before what this answer starts with.',
    input: ProcessOutputInput,
    annotations: { readOnlyHint: true },
  }, ({ id, offset, waitMs }) => readProcessOutput(deps, provider, accountId, machineId, id, offset ?? 0, waitMs ?? 0));

  defineTool(server, logger, 'process_input', {
    description: "Writes text to a running process's stdin (add \n to end a line).",
    input: ProcessInputInput,
  }, async ({ id, data }) => {
    await sendProcessInput(deps, provider, accountId, machineId, id, data);
    return { ok: true };
  });

  defineTool(server, logger, 'process_signal', {
    description: 'Sends TERM, KILL, INT or HUP to a running process and everything it started.',
    input: ProcessSignalInput,
    annotations: { destructiveHint: true },
  }, async ({ id, signal }) => {
    await signalProcess(deps, provider, accountId, machineId, id, signal);
    return { ok: true };
  });

  defineTool(server, logger, 'process_list', {
    description: "This machine's background processes, running and ended, oldest first.",
    input: NoInput,
    annotations: { readOnlyHint: true },
  }, async () => ({ data: await listProcesses(deps, provider, accountId, machineId) }));
}

function registerFileTools(server: McpServer, context: MachineToolContext, provider: MachineProvider): void {
  const { deps, accountId, machineId, logger } = context;
  defineTool(server, logger, 'file_read', {
    description: `Reads a file (at most ${TOOL_FILE_LIMIT / 1024 / 1024} MiB) as utf8 text or base64.`,
    input: FileReadInput,
    annotations: { readOnlyHint: true },
  }, async ({ path, encoding = 'utf8' }) => {
    const found = await readPath(deps, provider, accountId, machineId, path);
    if (found.type === 'directory') throw invalidRequest(`${path} is a directory: list it with file_list.`);
    if (found.size > TOOL_FILE_LIMIT) {
      found.content.destroy();
      throw invalidRequest(`${path} has ${found.size} bytes, more than file_read carries (${TOOL_FILE_LIMIT}); its owner can download it over HTTP.`);
    }
    const chunks: Buffer[] = [];
    for await (const chunk of found.content) chunks.push(chunk as Buffer);
    const bytes = Buffer.concat(chunks);
    if (encoding === 'base64') return { path, encoding, size: bytes.length, content: bytes.toString('base64') };
    let content: string;
    try {
      content = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      throw invalidRequest(`${path} is not UTF-8 text: read it with encoding base64.`);
    }
    return { path, encoding, size: bytes.length, content };
  });

  defineTool(server, logger, 'file_write', {
    description: 'Writes (or appends to) a file, creating its parent directories; content is utf8 text or base64.',
    input: FileWriteInput,
  }, async ({ path, content, encoding = 'utf8', append }) => {
    if (encoding === 'base64' && !/^[A-Za-z0-9+/]*={0,2}$/.test(content)) throw invalidRequest('content is not base64.');
    const bytes = Buffer.from(content, encoding);
    if (bytes.length > TOOL_FILE_LIMIT) throw invalidRequest(`content has ${bytes.length} bytes, more than file_write takes (${TOOL_FILE_LIMIT}).`);
    await writeFile(deps, provider, accountId, machineId, path, bytes, append ?? false);
    return { ok: true, path, size: bytes.length };
  });

  defineTool(server, logger, 'file_list', {
    description: "A directory's entries: name, type (file, directory, symlink), size and modifiedAt.",
    input: PathQuery,
    annotations: { readOnlyHint: true },
  }, ({ path }) => listDirectory(deps, provider, accountId, machineId, path));

  defineTool(server, logger, 'file_delete', {
    description: 'Deletes a file, or a directory and everything in it with recursive: true.',
    input: DeleteFileQuery,
    annotations: { destructiveHint: true },
  }, async ({ path, recursive }) => {
    await deletePath(deps, provider, accountId, machineId, path, recursive ?? false);
    return { ok: true };
  });
}
