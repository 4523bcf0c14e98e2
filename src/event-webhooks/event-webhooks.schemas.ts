import { Type } from 'typebox';
import { ALL_EVENT_TYPES, EVENT_TYPES } from '../events/event-types.ts';
import { ListQuerySchema } from '../http/pagination.ts';
import { NullableTimestamp, Timestamp } from '../http/schemas.ts';
import { idPattern } from '../shared/ids.ts';
import { URL_MAX_LENGTH } from './endpoints.service.ts';

const EventTypeOrAll = Type.Unsafe<string>({ type: 'string', enum: ['*', ...ALL_EVENT_TYPES], description: 'An event type, or "*" for all' });
const Events = Type.Array(EventTypeOrAll, { minItems: 1, maxItems: ALL_EVENT_TYPES.length + 1 });
const Url = Type.String({ minLength: 1, maxLength: URL_MAX_LENGTH, description: 'Absolute https:// URL' });
const Description = Type.String({ maxLength: 500 });

export const CreateEndpointBody = Type.Object(
  { url: Url, events: Type.Optional({ ...Events, default: ['*'] }), description: Type.Optional(Description) },
  { additionalProperties: false },
);

export const UpdateEndpointBody = Type.Object(
  { url: Type.Optional(Url), events: Type.Optional(Events), description: Type.Optional(Description), enabled: Type.Optional(Type.Boolean()) },
  { additionalProperties: false, minProperties: 1 },
);

export const EndpointSchema = Type.Object({
  id: Type.String(),
  url: Type.String(),
  events: Type.Array(Type.String()),
  description: Type.String(),
  enabled: Type.Boolean(),
  disabledReason: Type.Union([Type.Literal('failing'), Type.Null()], { description: '"failing" when the service disabled it after WEBHOOK_DISABLE_AFTER of failures; null otherwise (a manual pause too)' }),
  disabledAt: NullableTimestamp,
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const CreatedEndpointSchema = Type.Object({
  ...EndpointSchema.properties,
  secret: Type.String({ description: 'Signing secret (whsec_…): shown only in this response' }),
});

export const SecretSchema = Type.Object({ secret: Type.String({ description: 'The new signing secret: shown only in this response' }) });

export const TestResultSchema = Type.Object({
  ok: Type.Boolean(),
  status: Type.Union([Type.Integer(), Type.Null()], { description: "The receiver's HTTP status, or null when none came" }),
  error: Type.Union([Type.String(), Type.Null()]),
});

export const DeliverySchema = Type.Object({
  id: Type.String(),
  endpointId: Type.String(),
  eventId: Type.String(),
  eventType: Type.String(),
  status: Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('failed')]),
  attempts: Type.Integer(),
  lastResponse: Type.Union([
    Type.Object({
      status: Type.Union([Type.Integer(), Type.Null()]),
      body: Type.Union([Type.String(), Type.Null()], { description: 'At most the first 1,024 bytes' }),
      error: Type.Union([Type.String(), Type.Null()]),
      durationMs: Type.Union([Type.Integer(), Type.Null()]),
      at: Timestamp,
    }),
    Type.Null(),
  ]),
  nextAttemptAt: NullableTimestamp,
  createdAt: Timestamp,
});

export const DeliveriesQuery = Type.Object(
  {
    ...ListQuerySchema.properties,
    endpoint: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Only this endpoint' })),
    status: Type.Optional(Type.Enum(['pending', 'delivered', 'failed'], { type: 'string', description: 'Only deliveries in this state' })),
    eventType: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Only deliveries of events of this type' })),
    event: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Only the deliveries of this event (evt_…)' })),
  },
  { additionalProperties: false },
);

export const AttemptLogEntrySchema = Type.Object({
  n: Type.Integer({ description: '1 for the first attempt ever made' }),
  at: Timestamp,
  status: Type.Union([Type.Integer(), Type.Null()], { description: "The receiver's HTTP status, or null when none came" }),
  durationMs: Type.Integer(),
  error: Type.Union([Type.String(), Type.Null()]),
  body: Type.Union([Type.String(), Type.Null()], { description: 'At most the first 1,024 bytes of the answer' }),
});

export const DeliveryWithLogSchema = Type.Object({ ...DeliverySchema.properties, attemptLog: Type.Array(AttemptLogEntrySchema) });

export const EventSchema = Type.Object(
  { id: Type.String(), type: Type.String(), createdAt: Timestamp, data: Type.Object({}, { additionalProperties: true }) },
  { description: 'The envelope exactly as delivered' },
);

export const EventsQuery = Type.Object(
  {
    ...ListQuerySchema.properties,
    type: Type.Optional(Type.Unsafe<string>({ type: 'string', enum: [...ALL_EVENT_TYPES], description: 'Only events of this type' })),
    machineId: Type.Optional(Type.String({ pattern: idPattern('mch'), description: 'Only events about this machine (mch_…): its machine.* events and its runs\' run.* events' })),
  },
  { additionalProperties: false },
);

export const WindowBody = Type.Object(
  { since: Timestamp, until: Type.Optional(Timestamp) },
  { additionalProperties: false, description: 'A window of creation times, within the retention period; until defaults to now' },
);

export const CountSchema = Type.Object({ count: Type.Integer() });

export const EventTypesSchema = Type.Object({
  data: Type.Array(Type.Object({ type: Type.String(), description: Type.String() })),
});

export const EVENT_TYPE_CATALOG = Object.entries(EVENT_TYPES).map(([type, description]) => ({ type, description }));
