import type { FastifyRequest } from 'fastify';
import type { Principal } from '../http/principal.ts';
import { hashToken, isWellFormedToken } from '../shared/secrets.ts';
import { findMachineByTokenHash } from './machines.repository.ts';

/**
 * Bearer authenticator for `tmm_` machine tokens: valid while it is the
 * machine's current token and the machine exists. Where it may be used is the
 * auth hook's rule (its own machine's /mcp and /live-view only).
 */
export async function authenticateMachineToken(request: FastifyRequest, token: string): Promise<Principal | null> {
  if (!isWellFormedToken(token, 'tmm_')) return null;
  const machine = await findMachineByTokenHash(request.server.deps.db, hashToken(token));
  if (machine === undefined) return null;
  return { kind: 'machine', accountId: machine.account_id, machineId: machine.id };
}
