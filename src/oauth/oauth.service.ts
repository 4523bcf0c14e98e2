import type Provider from 'oidc-provider';
import type { Deps } from '../deps.ts';
import { inTransaction } from '../db/transaction.ts';
import { recordSecurityEvent, type RequestOrigin } from '../security-log/security-log.ts';
import type { BearerAuthenticator } from '../http/auth.ts';
import { AppError, notFound } from '../http/errors.ts';
import { MINUTE, toIso, toIsoOrNull } from '../shared/clock.ts';
import { hashToken, isWellFormedToken } from '../shared/secrets.ts';
import { applicationConnectedMailJob } from './oauth.jobs.ts';
import { displayText } from './oauth.mail.ts';
import { GRANT_TTL_S, MCP_SCOPE, mcpResource } from './oauth.resource.ts';
import { deleteGrantEverywhere, findGrant, findRecord, insertGrant, listGrantRows, recordGrantUse } from './oauth.repository.ts';

/** Like API keys' lastUsedAt: written at most once a minute per grant. */
const LAST_USED_RESOLUTION_MS = MINUTE;

/**
 * Bearer authenticator for `tmo_` access tokens: the token's record (by its
 * hash), unexpired by our clock, issued for the MCP resource, of a grant that
 * still exists (revoking a grant deletes its row, so its tokens fail at once).
 */
export function oauthAuthenticator(deps: Pick<Deps, 'db' | 'clock' | 'config'>): BearerAuthenticator {
  const resource = mcpResource(deps.config.publicUrl);
  return async (_request, token) => {
    if (!isWellFormedToken(token, 'tmo_')) return null;
    const now = deps.clock.now();
    const record = await findRecord(deps.db, 'AccessToken', hashToken(token), now);
    if (record === undefined) return null;
    const payload = JSON.parse(record.payload) as { grantId?: string; aud?: string | string[] };
    const audiences = Array.isArray(payload.aud) ? payload.aud : [payload.aud];
    if (payload.grantId === undefined || !audiences.includes(resource)) return null;
    const grant = await findGrant(deps.db, payload.grantId);
    if (grant === undefined || grant.expires_at <= now) return null;
    if (grant.last_used_at === null || now - grant.last_used_at >= LAST_USED_RESOLUTION_MS) await recordGrantUse(deps.db, grant.id, now);
    return { kind: 'oauth', accountId: grant.account_id, grantId: grant.id, clientId: grant.client_id };
  };
}

export interface ConsentRequest {
  client: { id: string; name: string; redirectHost: string };
  scopes: string[];
}

export interface ApplicationView {
  id: string;
  clientId: string;
  clientName: string;
  redirectHost: string;
  createdAt: string;
  lastUsedAt: string | null;
}

const expired = () => new AppError(404, 'not_found', 'This authorization request has expired or was already answered. Start again from the application.');

/** The pending authorization request behind a consent page, with its client. @throws AppError 404 when unknown, expired or answered. */
async function pendingInteraction(provider: Provider, uid: string) {
  const interaction = await provider.Interaction.find(uid);
  if (interaction === undefined || interaction.result !== undefined) throw expired();
  const clientId = String(interaction.params.client_id ?? '');
  const client = await provider.Client.find(clientId).catch(() => undefined);
  if (client === undefined) throw expired();
  const redirectUri = String(interaction.params.redirect_uri ?? '');
  const redirectHost = URL.parse(redirectUri)?.host ?? '';
  const name = displayText(client.clientName ?? '') || redirectHost || clientId;
  return { interaction, client: { id: clientId, name, redirectHost } };
}

/** What the consent page shows. @throws AppError 404 */
export async function describeConsent(provider: Provider, uid: string): Promise<ConsentRequest> {
  const { interaction, client } = await pendingInteraction(provider, uid);
  const requested = String(interaction.params.scope ?? '').split(' ').filter((scope) => scope !== '');
  return { client, scopes: requested.length > 0 ? requested : [MCP_SCOPE] };
}

/**
 * The account holder allows the client: a grant for the MCP resource, its row
 * (what the dashboard lists) and the security notice mail in one transaction,
 * then the authorization request resumes where the client's browser goes next.
 * @throws AppError 404
 */
export async function allowConsent(deps: Deps, provider: Provider, uid: string, accountId: string, origin: RequestOrigin | null = null): Promise<{ redirectTo: string }> {
  const { interaction, client } = await pendingInteraction(provider, uid);
  const now = deps.clock.now();
  const grant = new provider.Grant({ accountId, clientId: client.id });
  const requested = String(interaction.params.scope ?? '').split(' ');
  grant.addResourceScope(mcpResource(deps.config.publicUrl), MCP_SCOPE);
  // The authorization server knows `mcp` (and `offline_access`) as its own scopes too: grant those asked for, so nothing is left to ask.
  const known = requested.filter((scope) => scope === MCP_SCOPE || scope === 'offline_access');
  if (known.length > 0) grant.addOIDCScope(known.join(' '));
  const grantId = await grant.save();
  await inTransaction(deps.database, async (tx) => {
    await insertGrant(tx.db, {
      id: grantId,
      account_id: accountId,
      client_id: client.id,
      client_name: client.name,
      redirect_host: client.redirectHost,
      created_at: now,
      last_used_at: null,
      expires_at: now + GRANT_TTL_S * 1000,
    });
    await deps.jobs.enqueue(tx, applicationConnectedMailJob, [{ payload: { accountId, clientName: client.name, redirectHost: client.redirectHost, at: toIso(now) } }]);
    await recordSecurityEvent(tx.db, { accountId, type: 'oauth_grant_created', at: now, origin, detail: { grantId, clientName: client.name, redirectHost: client.redirectHost } });
  });
  return finish(interaction, { login: { accountId, remember: false }, consent: { grantId } });
}

/** The account holder refuses: the client gets `access_denied` (RFC 6749 4.1.2.1). @throws AppError 404 */
export async function denyConsent(provider: Provider, uid: string): Promise<{ redirectTo: string }> {
  const { interaction } = await pendingInteraction(provider, uid);
  return finish(interaction, { error: 'access_denied', error_description: 'The account holder did not allow this application.' });
}

/** What oidc-provider's interactionResult does, without its cookie: the consent API is not under the interaction's path. */
async function finish(interaction: InstanceType<Provider['Interaction']>, result: Record<string, unknown>): Promise<{ redirectTo: string }> {
  interaction.result = result;
  await interaction.save(interaction.exp - Math.floor(Date.now() / 1000));
  return { redirectTo: interaction.returnTo };
}

export async function listApplications(deps: Deps, accountId: string, limit: number, cursor: string | undefined): Promise<ApplicationView[]> {
  const rows = await listGrantRows(deps.db, accountId, limit, cursor);
  return rows.map((row) => ({
    id: row.id,
    clientId: row.client_id,
    clientName: row.client_name,
    redirectHost: row.redirect_host,
    createdAt: toIso(row.created_at),
    lastUsedAt: toIsoOrNull(row.last_used_at),
  }));
}

/** Ends a grant and every token of it at once. @throws AppError 404 for an unknown grant or another account's. */
export async function revokeApplication(deps: Deps, accountId: string, grantId: string, origin: RequestOrigin | null = null): Promise<void> {
  const grant = await findGrant(deps.db, grantId);
  if (grant === undefined || grant.account_id !== accountId) throw notFound('The application');
  await inTransaction(deps.database, async (tx) => {
    await deleteGrantEverywhere(tx.db, grantId);
    await recordSecurityEvent(tx.db, { accountId, type: 'oauth_grant_revoked', at: deps.clock.now(), origin, detail: { grantId, clientName: grant.client_name } });
  });
}
