import { Type } from 'typebox';
import { NullableTimestamp, Timestamp } from '../http/schemas.ts';
import { MACHINE_LIMITS } from '../machines/machines.schemas.ts';
import { RUN_STATUSES } from './runs.tables.ts';

const strict = { additionalProperties: false } as const;

/** The limits of a run's fields, once: the HTTP schemas below use them, and the MCP tools take those schemas. */
export const RUN_LIMITS = {
  command: 10_000,
  triggerName: 100,
  path: 4096,
  envKeys: 64,
  envValue: 32_768,
  /** POSIX names (what a shell can export), at most 128 characters. */
  envNamePattern: '^[A-Za-z_][A-Za-z0-9_]{0,127}$',
  timeoutMs: { min: 1000, max: 3_600_000 },
} as const;

export const Command = Type.String({ minLength: 1, maxLength: RUN_LIMITS.command, description: 'The command line, run by /bin/sh -c as root' });
export const AbsolutePath = Type.String({ minLength: 1, maxLength: RUN_LIMITS.path, pattern: '^/[^\\u0000]*$', description: 'An absolute path in the machine' });
export const CommandEnv = Type.Record(Type.String({ pattern: RUN_LIMITS.envNamePattern }), Type.String({ maxLength: RUN_LIMITS.envValue }), {
  maxProperties: RUN_LIMITS.envKeys,
  // A name the pattern does not match is refused, not ignored.
  additionalProperties: false,
  description: `Variables added to the machine's environment (at most ${RUN_LIMITS.envKeys})`,
});
const TimeoutMs = Type.Integer({ minimum: RUN_LIMITS.timeoutMs.min, maximum: RUN_LIMITS.timeoutMs.max, description: 'Killed past this, and failed with timedOut (default 600000)' });
const StopAfter = Type.Boolean({ description: 'Stop the machine when the run ends' });
const TriggerName = Type.String({ minLength: 1, maxLength: RUN_LIMITS.triggerName, description: 'One line, no control characters' });
const MachineId = Type.String({ minLength: 1, maxLength: MACHINE_LIMITS.id });

export const CreateRunBody = Type.Object(
  {
    command: Command,
    stopAfter: Type.Optional(StopAfter),
    cwd: Type.Optional({ ...AbsolutePath, description: 'The working directory (default /root)' }),
    env: Type.Optional(CommandEnv),
    timeoutMs: Type.Optional(TimeoutMs),
  },
  strict,
);

export const RunSchema = Type.Object({
  id: Type.String(),
  machineId: Type.String(),
  source: Type.Union([Type.Literal('manual'), Type.Literal('schedule'), Type.Literal('webhook')]),
  sourceId: Type.Union([Type.String(), Type.Null()], { description: 'The schedule or inbound webhook; null for manual runs' }),
  command: Type.String(),
  stopAfter: Type.Boolean(),
  status: Type.Enum(RUN_STATUSES, { description: 'pending (queued, or waiting for the machine to boot), running, succeeded or failed' }),
  exitCode: Type.Union([Type.Integer(), Type.Null()], { description: 'Null when the command did not exit by itself (timed out) or never ran' }),
  output: Type.Union([Type.String(), Type.Null()], { description: 'stdout and stderr together, in the order they came (or why the command did not run)' }),
  stdout: Type.Union([Type.String(), Type.Null()], { description: 'At most 1 MiB; null when the command never ran' }),
  stderr: Type.Union([Type.String(), Type.Null()], { description: 'At most 1 MiB; null when the command never ran' }),
  truncated: Type.Boolean({ description: 'Some output was past 1 MiB and is not kept' }),
  timedOut: Type.Boolean({ description: 'Killed for its timeout' }),
  createdAt: Timestamp,
  startedAt: NullableTimestamp,
  finishedAt: NullableTimestamp,
});

export const CreateScheduleBody = Type.Object(
  {
    machineId: MachineId,
    name: TriggerName,
    cron: Type.String({ minLength: 1, maxLength: 200, description: 'Five-field cron expression, in UTC' }),
    command: Command,
    stopAfter: Type.Optional(StopAfter),
  },
  strict,
);

export const ScheduleSchema = Type.Object({
  id: Type.String(),
  machineId: Type.String(),
  name: Type.String(),
  cron: Type.String(),
  command: Type.String(),
  stopAfter: Type.Boolean(),
  nextRunAt: Timestamp,
  lastRunAt: NullableTimestamp,
  createdAt: Timestamp,
});

export const CreateInboundWebhookBody = Type.Object(
  { machineId: MachineId, name: TriggerName, command: Command, stopAfter: Type.Optional(StopAfter) },
  strict,
);

export const InboundWebhookSchema = Type.Object({
  id: Type.String(),
  machineId: Type.String(),
  name: Type.String(),
  command: Type.String(),
  stopAfter: Type.Boolean(),
  lastTriggeredAt: NullableTimestamp,
  createdAt: Timestamp,
});

export const CreatedInboundWebhookSchema = Type.Object({
  ...InboundWebhookSchema.properties,
  url: Type.String({ description: 'POST here, signed, to start a run: shown only in this response' }),
  secret: Type.String({ description: 'Signing secret (whsec_…): shown only in this response' }),
});

export const TriggerListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 50 })),
    cursor: Type.Optional(Type.String({ pattern: '^[a-z]+_[0-9a-z]{26}$' })),
    machineId: Type.Optional(MachineId),
  },
  strict,
);
