import fp from 'fastify-plugin';
import type { ResolveAll } from '../event-webhooks/targets.ts';
import { applicationConnectedMailKind } from './oauth.jobs.ts';
import { deleteExpiredRecords } from './oauth.repository.ts';
import { oauthRoutes } from './oauth.routes.ts';
import { oauthAuthenticator } from './oauth.service.ts';

/**
 * OAuth 2.1 for the platform MCP endpoint: `tmo_` access tokens
 * as a credential (in every role), the connected-application mail and the
 * cleanup of expired records, and where the role serves the API, the
 * authorization server, its metadata and the consent and applications routes.
 */
export const oauthPlugin = fp<{ resolveAll?: ResolveAll }>(
  async (app, options) => {
    const { deps } = app;
    app.credentials.bearer('tmo_', oauthAuthenticator(deps));
    app.jobs.register(applicationConnectedMailKind(deps, app.mailer));
    app.maintenance.add('expired OAuth records', (now) => deleteExpiredRecords(deps.db, now));
    if (deps.config.role === 'worker') return;
    // Created at the first OAuth request: oidc-provider and its dependencies weigh some 40 MB of memory.
    let created: ReturnType<typeof createAuthorizationServer> | undefined;
    const createAuthorizationServer = async () => {
      const { createOAuthProvider } = await import('./oauth.provider.ts');
      return createOAuthProvider(deps, options.resolveAll ? { resolveAll: options.resolveAll } : {});
    };
    const authorizationServer = async () => {
      // A failed creation (the database was down, say) is tried again by the next request.
      created ??= createAuthorizationServer().catch((err: unknown) => {
        created = undefined;
        throw err;
      });
      return (await created).provider;
    };
    app.addHook('onClose', async () => {
      await (await created?.catch(() => undefined))?.close();
    });
    await app.register(oauthRoutes(authorizationServer));
  },
  { name: 'oauth', dependencies: ['core', 'auth', 'jobs', 'mail', 'maintenance'] },
);
