import { Type, type TSchema } from 'typebox';

export const DEFAULT_PAGE_SIZE = 50;

export const ListQuerySchema = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: DEFAULT_PAGE_SIZE, description: 'Page size, 1 to 100' })),
    cursor: Type.Optional(Type.String({ pattern: '^[a-z]+_[0-9a-z]{26}$', description: 'nextCursor of the previous page' })),
  },
  { additionalProperties: false },
);

export function pageSchema<T extends TSchema>(item: T) {
  return Type.Object({ data: Type.Array(item), nextCursor: Type.Union([Type.String(), Type.Null()]) });
}

export interface Page<T> {
  data: T[];
  nextCursor: string | null;
}

/** Lists are newest first and fetched with one row more than the page: that row says a next page exists. */
export function toPage<T extends { id: string }>(rows: T[], limit: number): Page<T> {
  const data = rows.slice(0, limit);
  return { data, nextCursor: rows.length > limit ? data[data.length - 1]!.id : null };
}
