/** True for a unique-constraint violation on either engine (SQLite's extended code 2067, Postgres' 23505). */
export function isUniqueViolation(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, errcode } = error as { code?: unknown; errcode?: unknown };
  return code === '23505' || errcode === 2067 || errcode === 1555;
}
