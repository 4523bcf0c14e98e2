import { invalidRequest } from '../http/errors.ts';

/** C0 and C1 control characters, DEL, and the Unicode line and paragraph separators. */
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/u;

/**
 * A name as it is stored: trimmed, not blank, one line without control
 * characters. Names of machines, pools, schedules and inbound webhooks travel
 * into events, stop reasons ("after schedule <name>"), logs and the dashboard,
 * where a newline or an escape sequence would forge or garble what is shown.
 * @throws AppError 400 for a blank name or one with control characters.
 */
export function checkName(raw: string, field = 'name'): string {
  const name = raw.trim();
  if (name === '') throw invalidRequest(`${field} must not be blank.`);
  if (CONTROL_CHARACTERS.test(name)) throw invalidRequest(`${field} must be one line without control characters.`);
  return name;
}
