import fp from 'fastify-plugin';
import { DAY } from '../shared/clock.ts';
import { idBoundAt } from '../shared/ids.ts';
import { deleteSecurityLogEntries, expiredSecurityLogIds } from './security-log.repository.ts';
import { securityLogRoutes } from './security-log.routes.ts';

/** The log is kept this long whatever RETENTION says (an account holder looks back further than a delivery log). */
export const SECURITY_LOG_RETENTION_MS = 400 * DAY;

/** The account's security log: its route, and its pruning after 400 days. */
export const securityLogPlugin = fp(
  async (app) => {
    const { db } = app.deps;
    app.retention.addKeyed(
      'security_log',
      ({ now }, after, limit) => expiredSecurityLogIds(db, idBoundAt('sec', now - SECURITY_LOG_RETENTION_MS), after, limit),
      (_context, ids) => deleteSecurityLogEntries(db, ids),
    );
    if (app.deps.config.role !== 'worker') await app.register(securityLogRoutes);
  },
  { name: 'security-log', dependencies: ['core', 'auth', 'maintenance'] },
);
