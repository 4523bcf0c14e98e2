import { Type, type TSchema } from 'typebox';
import { ProblemSchema } from './problem.ts';

export const OkSchema = Type.Object({ ok: Type.Literal(true) });

export const IdParamsSchema = Type.Object({ id: Type.String({ minLength: 1, maxLength: 100 }) }, { additionalProperties: false });

export const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601 UTC with milliseconds' });

export const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);

/** Success responses plus the problem+json errors every route can answer, for the OpenAPI document. */
export function responses<T extends Record<number, TSchema>>(success: T) {
  return { ...success, '4xx': ProblemSchema, '5xx': ProblemSchema };
}

