import { Type } from 'typebox';
import { Timestamp } from '../http/schemas.ts';
import { AbsolutePath, CreateRunBody } from '../runs/runs.schemas.ts';
import { OUTPUT_WAIT_LIMIT_MS } from './machine-access.service.ts';

/**
 * The inputs of a machine's files and processes, once: the HTTP routes (machine-access.routes.ts) take them,
 * and the machine's MCP tools (machine-tools.ts) are built from them.
 */

const strict = { additionalProperties: false } as const;

export const MachineParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 100 }) }, strict);
export const ProcessId = Type.String({ pattern: '^proc_[0-9a-z]{26}$', description: 'The process id (proc_…) its start answered' });
export const ProcessParams = Type.Object({ id: MachineParams.properties.id, procId: ProcessId }, strict);
export const PathQuery = Type.Object({ path: AbsolutePath }, strict);
export const DeleteFileQuery = Type.Object({ path: AbsolutePath, recursive: Type.Optional(Type.Boolean({ description: 'A directory and everything in it' })) }, strict);

const { command, cwd, env } = CreateRunBody.properties;
export const StartProcessBody = Type.Object({ command, cwd, env }, strict);

export const ProcessOutputQuery = Type.Object(
  {
    offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 2 ** 48, default: 0, description: 'Bytes of stdout and stderr together already read (default 0)' })),
    waitMs: Type.Optional(Type.Integer({ minimum: 0, maximum: OUTPUT_WAIT_LIMIT_MS, default: 0, description: 'How long to wait for more output (default 0)' })),
  },
  strict,
);

export const ProcessInputBody = Type.Object({ data: Type.String({ maxLength: 1024 * 1024, description: 'Text for its stdin (add \\n to end a line)' }) }, strict);

export const ProcessSignalName = Type.Enum(['TERM', 'KILL', 'INT', 'HUP'], { type: 'string' });
export const ProcessSignalBody = Type.Object({ signal: ProcessSignalName }, strict);

export const FileEntrySchema = Type.Object({
  name: Type.String(),
  type: Type.Union([Type.Literal('file'), Type.Literal('directory'), Type.Literal('symlink')]),
  size: Type.Integer({ description: 'Bytes (of the link itself, for a symlink)' }),
  modifiedAt: Timestamp,
});
export const DirectorySchema = Type.Object({ path: Type.String(), entries: Type.Array(FileEntrySchema) });

const EndReason = Type.Union([Type.Literal('exited'), Type.Literal('machine-stopped'), Type.Literal('lost'), Type.Null()], {
  description: 'Why it ended: `exited` (by itself or a signal), `machine-stopped` (the machine stopped under it), `lost` (its supervisor in the machine died); null while it runs',
});
export const ProcessSchema = Type.Object({
  id: Type.String({ description: 'proc_…' }),
  command: Type.String(),
  pid: Type.Integer({ description: "Its process id in the machine (and its process group's)" }),
  status: Type.Union([Type.Literal('running'), Type.Literal('exited')]),
  exitCode: Type.Union([Type.Integer(), Type.Null()], { description: 'Null while it runs, or when the machine stopped under it' }),
  endReason: EndReason,
  startedAt: Timestamp,
});
export const ProcessOutputSchema = Type.Object({
  stdout: Type.String(),
  stderr: Type.String(),
  offset: Type.Integer({ description: 'Pass it as `offset` to read on: bytes of stdout and stderr together, in the order they came' }),
  dropped: Type.Integer({ description: 'Bytes before this output the machine no longer keeps (it keeps the last 64 MiB of a process\'s output): the read started at the oldest byte kept' }),
  running: Type.Boolean(),
  exitCode: Type.Union([Type.Integer(), Type.Null()]),
  endReason: EndReason,
});
