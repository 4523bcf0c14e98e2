import { Type } from 'typebox';
import { NullableTimestamp, Timestamp } from '../http/schemas.ts';

const strict = { additionalProperties: false } as const;

export const MachineStatusSchema = Type.Union(
  [
    Type.Literal('starting'),
    Type.Literal('running'),
    Type.Literal('stopping'),
    Type.Literal('stopped'),
    Type.Literal('error'),
    Type.Literal('destroyed'),
  ],
  { description: 'starting, running, stopping, stopped, error or destroyed' },
);

/** Label keys as Kubernetes-style names; values short strings. */
export const LabelsSchema = Type.Record(
  Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$' }),
  Type.String({ maxLength: 256 }),
  { maxProperties: 50, additionalProperties: false, description: 'Map of string keys (1–63 of A-Z a-z 0-9 . _ / -) to string values (at most 256 characters); at most 50' },
);

export const OnExpireSchema = Type.Union([Type.Literal('stop'), Type.Literal('destroy')], {
  description: 'What happens at expiresAt: stop (default) or destroy',
});

export const MachineName = Type.String({ minLength: 1, maxLength: 100 });

export const CreateMachineBody = Type.Object(
  {
    name: MachineName,
    size: Type.Optional(Type.String({ minLength: 1, maxLength: 50, description: 'A size of the provider (simulated: small, medium, large); default small' })),
    externalId: Type.Optional(Type.String({ maxLength: 255, description: 'Your own reference, carried into events' })),
    labels: Type.Optional(LabelsSchema),
    expiresAt: Type.Optional(Type.String({ format: 'date-time', description: 'When the machine expires; must be in the future' })),
    onExpire: Type.Optional(OnExpireSchema),
    pool: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'A warm pool (name or id) to take the machine from' })),
  },
  strict,
);

export const MachineSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  status: MachineStatusSchema,
  size: Type.String(),
  externalId: Type.String({ description: 'The empty string when none was given' }),
  labels: Type.Record(Type.String(), Type.String()),
  expiresAt: NullableTimestamp,
  createdAt: Timestamp,
});

export const MachineWithTokenSchema = Type.Object({
  ...MachineSchema.properties,
  mcpToken: Type.String({ description: 'Machine token (tmm_…): shown only in this response' }),
});

export const ListMachinesQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 50 })),
    cursor: Type.Optional(Type.String({ pattern: '^[a-z]+_[0-9a-z]{26}$' })),
    status: Type.Optional(MachineStatusSchema),
  },
  strict,
);

export const PoolName = Type.String({ minLength: 1, maxLength: 60 });

export const CreatePoolBody = Type.Object(
  {
    name: PoolName,
    size: Type.String({ minLength: 1, maxLength: 50 }),
    count: Type.Integer({ minimum: 0, maximum: 20, description: 'Machines kept booted and unclaimed' }),
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
  createdAt: Timestamp,
});

export const LiveViewSchema = Type.Object({
  url: Type.String({ description: 'Opens the machine’s screen; anyone with the link can see it until expiresAt' }),
  expiresAt: Timestamp,
});
