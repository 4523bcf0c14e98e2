import { invalidRequest } from '../http/errors.ts';
import type { Deps } from '../deps.ts';
import { templateNotFound } from './machines.errors.ts';
import { MACHINE_LIMITS } from './machines.schemas.ts';
import { findTemplateByRef, type TemplateRow } from './templates.repository.ts';

/** A template named by id or name, for a machine or a pool to be made from. @throws AppError 404 for an unknown one or another account's. */
export async function templateByRef(deps: Pick<Deps, 'db'>, accountId: string, ref: string): Promise<TemplateRow> {
  const row = await findTemplateByRef(deps.db, accountId, ref);
  if (row === undefined) throw templateNotFound();
  return row;
}

/**
 * A new machine's environment when it starts from a saved disk: the one the
 * disk was saved with (the engine keeps it in the disk's configuration too, so
 * answers must name it), with the creator's own over it; answers the sealed
 * whole and its names, as the machine's columns hold them.
 * @throws AppError 400 when together they are over the limit.
 */
export function envFromTemplate(deps: Pick<Deps, 'secrets'>, template: Pick<TemplateRow, 'env_sealed'>, own: Record<string, string>): { env_names: string; env_sealed: string | null } {
  const env = { ...(template.env_sealed ? (JSON.parse(deps.secrets.open(template.env_sealed)) as Record<string, string>) : {}), ...own };
  const names = Object.keys(env);
  if (names.length > MACHINE_LIMITS.envVariables) {
    throw invalidRequest(`env: with the template's own variables the machine would have ${names.length}; at most ${MACHINE_LIMITS.envVariables}.`);
  }
  return { env_names: JSON.stringify(names), env_sealed: names.length === 0 ? null : deps.secrets.seal(JSON.stringify(env)) };
}
