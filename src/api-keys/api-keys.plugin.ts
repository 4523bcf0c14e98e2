import fp from 'fastify-plugin';
import { otherProcessesCommits } from '../db/data-version.ts';
import { createApiKeyCache } from './api-key-cache.ts';
import { apiKeysRoutes } from './api-keys.routes.ts';
import { apiKeyAuthenticator } from './api-keys.service.ts';

/** API keys: `tmk_` Bearer tokens as a credential (in every role), and the routes where the role serves the API. */
export const apiKeysPlugin = fp(
  async (app) => {
    const { database, db, clock, config, signals } = app.deps;
    const cache = createApiKeyCache();
    signals.subscribe(cache.hear);
    app.credentials.bearer('tmk_', apiKeyAuthenticator({ db, clock, cache, otherProcessesCommits: otherProcessesCommits(database) }));
    if (config.role !== 'worker') await app.register(apiKeysRoutes);
  },
  { name: 'api-keys', dependencies: ['core', 'auth'] },
);
