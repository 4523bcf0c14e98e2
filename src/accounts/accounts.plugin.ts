import fp from 'fastify-plugin';
import { Gauge } from 'prom-client';
import { passwordHashingLoad } from './passwords.ts';
import { accountMailKinds } from './accounts.jobs.ts';
import { accountsRoutes } from './accounts.routes.ts';
import { deleteSpentEmailTokens, spentEmailTokenHashes } from './email-tokens.repository.ts';
import { deleteExpiredChallenges, deleteExpiredPendingSignIns } from './second-factor.repository.ts';
import { deleteIdleSessions, idleSessionIds } from './sessions.repository.ts';
import { deleteExpiredSpentChallenges } from './signing-keys.repository.ts';
import { authenticateSession, readSessionCookie, SESSION_IDLE_MS } from './sessions.service.ts';

/** Accounts and sessions: the session cookie as a credential (in every role), and the routes where the role serves the API. */
export const accountsPlugin = fp(
  async (app) => {
    app.credentials.cookie({ read: readSessionCookie, authenticate: authenticateSession });
    for (const kind of accountMailKinds(app.deps, app.mailer)) app.jobs.register(kind);
    const { db } = app.deps;
    app.retention.addKeyed('sessions', ({ now }, after, limit) => idleSessionIds(db, now - SESSION_IDLE_MS, after, limit), ({ now }, ids) => deleteIdleSessions(db, now - SESSION_IDLE_MS, ids));
    app.maintenance.add('expired sign-in steps and passkey challenges, stored or spent', async (now) => {
      await deleteExpiredPendingSignIns(db, now);
      await deleteExpiredChallenges(db, now);
      await deleteExpiredSpentChallenges(db, now);
    });
    app.retention.addKeyed('email_tokens', ({ now }, after, limit) => spentEmailTokenHashes(db, now, after, limit), ({ now }, hashes) => deleteSpentEmailTokens(db, now, hashes));
    // Process-wide, like the hashing queue itself: its depth is the first sign of a sign-in flood.
    new Gauge({
      name: 'password_hashes_in_progress',
      help: 'Password hashes (sign-in, sign-up, reset, change) running or waiting, by state',
      labelNames: ['state'] as const,
      registers: [app.metrics.registry],
      collect() {
        const load = passwordHashingLoad();
        this.set({ state: 'running' }, load.running);
        this.set({ state: 'queued' }, load.queued);
      },
    });
    if (app.deps.config.role !== 'worker') await app.register(accountsRoutes);
  },
  { name: 'accounts', dependencies: ['core', 'auth', 'jobs', 'mail', 'maintenance'] },
);
