import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { refuseBody } from '../http/validation.ts';
import { accountIdOf, sessionOf } from '../http/auth.ts';
import { ListQuerySchema, pageSchema, toPage, DEFAULT_PAGE_SIZE } from '../http/pagination.ts';
import { IdParamsSchema, OkSchema, responses } from '../http/schemas.ts';
import {
  AccountResponse,
  ChangePasswordBody,
  MeResponse,
  SignInResponse,
  ForgotBody,
  RegisterBody,
  ResetBody,
  SessionSchema,
  SignInBody,
  TokenBody,
} from './accounts.schemas.ts';
import {
  accountView,
  changePassword,
  confirmEmail,
  register,
  requestEmailConfirmation,
  requestPasswordReset,
  resetPassword,
  signIn,
} from './accounts.service.ts';
import { dummyPasswordHash } from './passwords.ts';
import { secondFactorRoutes } from './second-factor.routes.ts';
import { secondFactorSummary } from './second-factor.repository.ts';
import { pendingCookieName, setShortCookie, type SecondFactorStep, type SignedIn } from './second-step.service.ts';
import type { FastifyReply } from 'fastify';
import type { Config } from '../config.ts';
import { clearSessionCookie, clientInfo, endSession, listSessions, readSessionCookie, setSessionCookie, signOut } from './sessions.service.ts';

const tags = ['accounts'];

/** Signed in: the session cookie and the account. A second step: the pending cookie and what can complete it. */
export function answerSignIn(reply: FastifyReply, config: Readonly<Config>, outcome: SignedIn | SecondFactorStep) {
  if ('pendingToken' in outcome) {
    setShortCookie(reply, config, pendingCookieName(config), outcome.pendingToken);
    return { secondFactor: outcome.secondFactor };
  }
  setSessionCookie(reply, config, outcome.sessionToken);
  return { account: outcome.account };
}

export const accountsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { deps } = app;
  await app.register(secondFactorRoutes);
  // Now, in the background: the first sign-in with an unknown email must cost one hash, not two.
  void dummyPasswordHash(deps.config.passwordHashCost).catch(() => {});

  app.post('/api/auth/register', {
    config: { auth: 'none' },
    schema: { tags, summary: 'Create an account and sign in; sends a confirmation mail', body: RegisterBody, response: responses({ 201: AccountResponse }) },
  }, async (request, reply) => {
    const { account, sessionToken } = await register(deps, request.body, clientInfo(request));
    setSessionCookie(reply, deps.config, sessionToken);
    return reply.code(201).send({ account });
  });

  app.post('/api/auth/login', {
    config: { auth: 'none' },
    schema: {
      tags,
      summary: 'Sign in; sets the session cookie',
      description: 'When an authenticator app is on, answers {"secondFactor": {"required": true, "methods": [...]}} and a pending cookie (5 minutes) instead of a session: complete it at POST /api/auth/login/second-factor.',
      body: SignInBody,
      response: responses({ 200: SignInResponse }),
    },
  }, async (request, reply) => answerSignIn(reply, deps.config, await signIn(deps, request.body, clientInfo(request))));

  app.post('/api/auth/logout', {
    config: { auth: 'none' },
    preValidation: refuseBody,
    schema: { tags, summary: 'Sign out this session', response: responses({ 204: Type.Null() }) },
  }, async (request, reply) => {
    const token = readSessionCookie(request);
    if (token !== undefined) await signOut(deps.database, token, clientInfo(request), deps.clock.now());
    clearSessionCookie(reply, deps.config);
    return reply.code(204).send(null);
  });

  app.post('/api/auth/verify', {
    config: { auth: 'none' },
    schema: { tags, summary: 'Confirm the email address with the token from the emailed link', body: TokenBody, response: responses({ 200: OkSchema }) },
  }, async (request) => {
    await confirmEmail(deps, request.body.token, clientInfo(request));
    return { ok: true as const };
  });

  app.post('/api/auth/forgot', {
    config: { auth: 'none' },
    schema: {
      tags,
      summary: 'Email a password-reset link',
      description: 'Always answers {"ok": true}, at once, whether or not the address has an account.',
      body: ForgotBody,
      response: responses({ 200: OkSchema }),
    },
  }, async (request) => {
    await requestPasswordReset(deps, request.body.email, request.ip);
    return { ok: true as const };
  });

  app.post('/api/auth/reset', {
    config: { auth: 'none' },
    schema: {
      tags,
      summary: 'Set a new password from the emailed link; signs out every session and signs the caller in',
      description: 'When an authenticator app is on, the reset does not sign in: it answers the second step, as POST /api/auth/login does.',
      body: ResetBody,
      response: responses({ 200: SignInResponse }),
    },
  }, async (request, reply) => answerSignIn(reply, deps.config, await resetPassword(deps, request.body, clientInfo(request))));

  app.get('/api/me', {
    schema: { tags, summary: 'The signed-in account and its second factors', response: responses({ 200: MeResponse }) },
  }, async (request) => {
    // An API key arrives with its owner's fields, read (or cached) with the key itself.
    if (request.principal?.kind === 'api_key') return { account: request.principal.account, secondFactor: request.principal.secondFactor };
    const accountId = accountIdOf(request);
    const [account, secondFactor] = await Promise.all([accountView(deps.db, accountId), secondFactorSummary(deps.db, accountId)]);
    return { account, secondFactor };
  });

  app.post('/api/me/verify-email', {
    preValidation: refuseBody,
    schema: { tags, summary: 'Send a new confirmation mail', response: responses({ 202: OkSchema }) },
  }, async (request, reply) => {
    await requestEmailConfirmation(deps, accountIdOf(request));
    return reply.code(202).send({ ok: true as const });
  });

  app.post('/api/me/password', {
    config: { auth: 'session' },
    schema: {
      tags,
      summary: 'Change the password; signs out every other session and sends a security notice',
      body: ChangePasswordBody,
      response: responses({ 200: OkSchema }),
    },
  }, async (request) => {
    const { accountId, sessionId } = sessionOf(request);
    await changePassword(deps, accountId, sessionId, request.body, clientInfo(request));
    return { ok: true as const };
  });

  app.get('/api/me/sessions', {
    schema: { tags, summary: "The account's signed-in sessions", querystring: ListQuerySchema, response: responses({ 200: pageSchema(SessionSchema) }) },
  }, async (request) => {
    const limit = request.query.limit ?? DEFAULT_PAGE_SIZE;
    const current = request.principal?.kind === 'session' ? request.principal.sessionId : null;
    return toPage(await listSessions(deps.db, accountIdOf(request), current, limit + 1, request.query.cursor), limit);
  });

  app.delete('/api/me/sessions/:id', {
    preValidation: refuseBody,
    schema: { tags, summary: 'Sign out one session', params: IdParamsSchema, response: responses({ 204: Type.Null() }) },
  }, async (request, reply) => {
    await endSession(deps.database, accountIdOf(request), request.params.id, clientInfo(request), deps.clock.now());
    return reply.code(204).send(null);
  });
};
