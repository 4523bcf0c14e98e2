import { Type } from 'typebox';
import { NullableTimestamp, Timestamp } from '../http/schemas.ts';
import { MACHINE_LIMITS } from './machines.schemas.ts';
import { RUN_STATUSES } from './runs.tables.ts';

const strict = { additionalProperties: false } as const;

/** The limits of a run's fields, once: the HTTP schemas below and the MCP tools' zod schemas are both built from them. */
export const RUN_LIMITS = { command: 10_000, triggerName: 100 } as const;

export const Command = Type.String({ minLength: 1, maxLength: RUN_LIMITS.command, description: 'The command line' });
const StopAfter = Type.Boolean({ description: 'Stop the machine when the run ends' });
const TriggerName = Type.String({ minLength: 1, maxLength: RUN_LIMITS.triggerName, description: 'One line, no control characters' });
const MachineId = Type.String({ minLength: 1, maxLength: MACHINE_LIMITS.id });

export const CreateRunBody = Type.Object({ command: Command, stopAfter: Type.Optional(StopAfter) }, strict);

export const RunSchema = Type.Object({
  id: Type.String(),
  machineId: Type.String(),
  source: Type.Union([Type.Literal('manual'), Type.Literal('schedule'), Type.Literal('webhook')]),
  sourceId: Type.Union([Type.String(), Type.Null()], { description: 'The schedule or inbound webhook; null for manual runs' }),
  command: Type.String(),
  stopAfter: Type.Boolean(),
  status: Type.Enum(RUN_STATUSES, { description: 'pending (queued, or waiting for the machine to boot), running, succeeded or failed' }),
  exitCode: Type.Union([Type.Integer(), Type.Null()]),
  output: Type.Union([Type.String(), Type.Null()]),
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
