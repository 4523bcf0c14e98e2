import { DEFAULT_SCREEN, SCREEN_LIMITS } from '../providers/screen-size.ts';
import { Type } from 'typebox';
import { ListQuerySchema } from '../http/pagination.ts';
import { NullableTimestamp, Timestamp } from '../http/schemas.ts';
import { MACHINE_STATUSES } from './machines.tables.ts';
import { AUTO_STOP_MINUTES } from './activity.ts';
import { NetworkPolicySchema } from '../providers/network-policy.ts';

const strict = { additionalProperties: false } as const;

/**
 * The limits of a machine's fields, once: the HTTP schemas below use them,
 * and the platform MCP tools (machines.mcp.ts) take those schemas.
 */
export const MACHINE_LIMITS = {
  name: 100,
  size: 50,
  externalId: 255,
  /** Kubernetes-style label keys: 1–63 of A-Z a-z 0-9 . _ / -, starting with a letter or digit. */
  labelKeyPattern: '^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$',
  labelValue: 256,
  labels: 50,
  poolRef: 100,
  templateRef: 100,
  id: 100,
  envNamePattern: '^[A-Za-z_][A-Za-z0-9_]*$',
  envName: 255,
  /** Bytes of one value, in UTF-8. */
  envValueBytes: 32 * 1024,
  envVariables: 64,
} as const;

export const EnvSchema = Type.Record(
  Type.String({ pattern: MACHINE_LIMITS.envNamePattern, maxLength: MACHINE_LIMITS.envName }),
  Type.String({ maxLength: MACHINE_LIMITS.envValueBytes }),
  {
    maxProperties: MACHINE_LIMITS.envVariables,
    additionalProperties: false,
    description: `Environment variables of every command, process and terminal of the machine: names [A-Za-z_][A-Za-z0-9_]*, values up to 32 KiB; at most ${MACHINE_LIMITS.envVariables}. Stored encrypted; answers show only the names`,
  },
);

export const MachineStatusSchema = Type.Enum(MACHINE_STATUSES, { type: 'string', description: MACHINE_STATUSES.join(', ') });

export const LabelsSchema = Type.Record(
  Type.String({ pattern: MACHINE_LIMITS.labelKeyPattern }),
  Type.String({ maxLength: MACHINE_LIMITS.labelValue }),
  {
    maxProperties: MACHINE_LIMITS.labels,
    additionalProperties: false,
    description: `Map of string keys (1–63 of A-Z a-z 0-9 . _ / -) to string values (at most ${MACHINE_LIMITS.labelValue} characters); at most ${MACHINE_LIMITS.labels}`,
  },
);

export const OnExpireSchema = Type.Enum(['stop', 'destroy'], {
  type: 'string',
  description: 'What happens at expiresAt: stop (default) or destroy',
});

export const MachineName = Type.String({ minLength: 1, maxLength: MACHINE_LIMITS.name, description: 'One line, no control characters' });

/** The display of machines whose image has one. */
export const ScreenSizeSchema = Type.Object(
  {
    width: Type.Integer({ minimum: SCREEN_LIMITS.min.width, maximum: SCREEN_LIMITS.max.width }),
    height: Type.Integer({ minimum: SCREEN_LIMITS.min.height, maximum: SCREEN_LIMITS.max.height }),
  },
  { ...strict, description: `The display's size in pixels (default ${DEFAULT_SCREEN.width}×${DEFAULT_SCREEN.height})` },
);

/** Idle stop. */
export const AutoStopMinutesSchema = Type.Integer({
  minimum: AUTO_STOP_MINUTES.min,
  maximum: AUTO_STOP_MINUTES.max,
  description: `Idle stop: a running machine with no activity for this many minutes is stopped (machine.stopped, reason idle); 0: never; at most ${AUTO_STOP_MINUTES.max} (a week). Default ${AUTO_STOP_MINUTES.default}. Activity is a request that reaches the machine (MCP, runs, files, processes, terminal, screen, previews, live views) or a run still running; a background process alone is not`,
});

export const CreateMachineBody = Type.Object(
  {
    name: MachineName,
    size: Type.Optional(Type.String({ minLength: 1, maxLength: MACHINE_LIMITS.size, description: 'A size of the provider (simulated: small, medium, large); default small' })),
    externalId: Type.Optional(Type.String({ maxLength: MACHINE_LIMITS.externalId, description: 'Your own reference, carried into events' })),
    labels: Type.Optional(LabelsSchema),
    expiresAt: Type.Optional(Type.String({ format: 'date-time', description: 'When the machine expires; must be in the future' })),
    onExpire: Type.Optional(OnExpireSchema),
    pool: Type.Optional(Type.String({ minLength: 1, maxLength: MACHINE_LIMITS.poolRef, description: 'A warm pool (name or id) to take the machine from' })),
    screen: Type.Optional(ScreenSizeSchema),
    env: Type.Optional(EnvSchema),
    image: Type.Optional(Type.String({ minLength: 1, maxLength: 50, description: 'An image the operator offers (GET /api/images); default: the base image' })),
    autoStopMinutes: Type.Optional(AutoStopMinutesSchema),
    network: Type.Optional(NetworkPolicySchema),
    template: Type.Optional(Type.String({ minLength: 1, maxLength: MACHINE_LIMITS.templateRef, description: 'A template (id or name: GET /api/templates) to start from, with its files; not with image or pool' })),
  },
  strict,
);

/**
 * PATCH /api/machines/{id}: the settings a machine may change while it
 * exists, each optional (what is left out stays); at least one. A setting
 * of the record alone goes in MachineChanges and updateMachine too; network
 * goes to setMachineNetwork, since the host must take it.
 */
export const UpdateMachineBody = Type.Object(
  {
    autoStopMinutes: Type.Optional(AutoStopMinutesSchema),
    network: Type.Optional(NetworkPolicySchema),
  },
  { ...strict, minProperties: 1 },
);

export const MachineSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  status: MachineStatusSchema,
  size: Type.String(),
  externalId: Type.String({ description: 'The empty string when none was given' }),
  labels: Type.Record(Type.String(), Type.String()),
  expiresAt: NullableTimestamp,
  screen: ScreenSizeSchema,
  image: Type.String({ description: 'The name of its image (GET /api/images); `default`: the base image' }),
  envNames: Type.Array(Type.String(), { description: 'The names of the environment given at create; its values are never shown' }),
  autoStopMinutes: Type.Integer({ description: 'Idle stop: minutes without activity before the machine is stopped (reason idle); 0: never' }),
  network: Type.Union([NetworkPolicySchema, Type.Null()], { description: "Its network policy; null: the operator's default (internet open unless MACHINE_EGRESS is off)" }),
  template: Type.Union([Type.String(), Type.Null()], { description: 'The template (tpl_…) it was made from; null for one made from an image' }),
  createdAt: Timestamp,
});

export const MachineWithTokenSchema = Type.Object({
  ...MachineSchema.properties,
  mcpToken: Type.String({ description: 'Machine token (tmm_…): shown only in this response' }),
});

export const ImageSchema = Type.Object({
  name: Type.String({ description: 'What POST /api/machines {image} takes' }),
  default: Type.Boolean({ description: 'The image of machines that name none' }),
});

export const ListMachinesQuery = Type.Object({ ...ListQuerySchema.properties, status: Type.Optional(MachineStatusSchema) }, strict);

export const PoolName = Type.String({ minLength: 1, maxLength: 60 });

export const CreatePoolBody = Type.Object(
  {
    name: PoolName,
    size: Type.String({ minLength: 1, maxLength: MACHINE_LIMITS.size }),
    count: Type.Integer({ minimum: 0, maximum: 20, description: 'Machines kept booted and unclaimed' }),
    template: Type.Optional(Type.String({ minLength: 1, maxLength: MACHINE_LIMITS.templateRef, description: 'A template (id or name) its machines start from; it cannot be deleted while the pool names it' })),
  },
  strict,
);

export const UpdatePoolBody = Type.Object({ count: Type.Integer({ minimum: 0, maximum: 20 }) }, strict);

export const PoolSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  size: Type.String(),
  count: Type.Integer(),
  ready: Type.Integer({ description: 'Booted, unclaimed machines right now' }),
  template: Type.Union([Type.String(), Type.Null()], { description: 'The template (tpl_…) its machines start from; null: the base image' }),
  createdAt: Timestamp,
});

export const LiveViewSchema = Type.Object({
  url: Type.String({ description: 'Opens the machine’s screen; anyone with the link can see it until expiresAt' }),
  expiresAt: Timestamp,
});
