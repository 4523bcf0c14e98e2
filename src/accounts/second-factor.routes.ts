import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { AuthenticationResponseJSON, RegistrationResponseJSON } from '@simplewebauthn/server';
import { Type } from 'typebox';
import { accountIdOf, sessionOf } from '../http/auth.ts';
import { invalidRequest } from '../http/errors.ts';
import { DEFAULT_PAGE_SIZE, ListQuerySchema, pageSchema, toPage } from '../http/pagination.ts';
import { requireRecentAuthentication } from '../http/recent-authentication.ts';
import { IdParamsSchema, OkSchema, responses } from '../http/schemas.ts';
import { refuseBody } from '../http/validation.ts';
import { AccountResponse } from './accounts.schemas.ts';
import { listPasskeys, passkeyRegistrationOptions, registerPasskey, removePasskey, renameAccountPasskey } from './passkeys.service.ts';
import {
  CodeBody,
  NewPasskeyBody,
  PasskeySchema,
  PasskeySignInBody,
  ProofBody,
  RecoveryCodesSchema,
  RenamePasskeyBody,
  SecondStepBody,
  TotpEnrolmentSchema,
  WebAuthnOptionsSchema,
} from './second-factor.schemas.ts';
import { confirmTotpEnrolment, disableTotp, oneProof, reauthenticate, regenerateRecoveryCodes, startTotpEnrolment } from './second-factor.service.ts';
import {
  clearShortCookie,
  completeSecondStep,
  passkeyCookieName,
  passkeySignInOptions,
  pendingCookieName,
  readCookie,
  secondStepPasskeyOptions,
  setShortCookie,
  signInWithPasskey,
} from './second-step.service.ts';
import { clientInfo, setSessionCookie } from './sessions.service.ts';

const tags = ['second factor'];
const session = { auth: 'session' } as const;

/** TOTP, recovery codes, passkeys, the second step of sign-in, and reauthentication. */
export const secondFactorRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { deps } = app;
  const { config } = deps;

  app.post('/api/me/totp', {
    config: session,
    preValidation: refuseBody,
    schema: { tags, summary: 'Start setting up an authenticator app: a new secret, pending until confirmed', response: responses({ 200: TotpEnrolmentSchema }) },
  }, async (request) => startTotpEnrolment(deps, sessionOf(request).accountId));

  app.post('/api/me/totp/confirm', {
    config: session,
    schema: { tags, summary: 'Turn the authenticator app on with its first code; answers the recovery codes (shown once)', body: CodeBody, response: responses({ 200: RecoveryCodesSchema }) },
  }, async (request) => confirmTotpEnrolment(deps, sessionOf(request).accountId, request.body.code, clientInfo(request)));

  app.delete('/api/me/totp', {
    config: session,
    schema: {
      tags,
      summary: 'Turn the authenticator app off (needs a recent authentication, and a code or the password)',
      body: ProofBody,
      response: responses({ 204: Type.Null() }),
    },
  }, async (request, reply) => {
    requireRecentAuthentication(request, deps.clock.now());
    await disableTotp(deps, sessionOf(request).accountId, oneProof(request.body ?? {}), clientInfo(request));
    return reply.code(204).send(null);
  });

  app.post('/api/me/recovery-codes', {
    config: session,
    preValidation: refuseBody,
    schema: { tags, summary: 'A new set of 10 recovery codes; the old ones stop working (needs a recent authentication)', response: responses({ 200: RecoveryCodesSchema }) },
  }, async (request) => {
    requireRecentAuthentication(request, deps.clock.now());
    return regenerateRecoveryCodes(deps, sessionOf(request).accountId, clientInfo(request));
  });

  app.post('/api/me/reauthenticate', {
    config: session,
    schema: {
      tags,
      summary: 'Confirm the password or a second-factor code: renews the recent authentication for 10 minutes',
      body: ProofBody,
      response: responses({ 200: OkSchema }),
    },
  }, async (request) => {
    const { accountId, sessionId } = sessionOf(request);
    await reauthenticate(deps, accountId, sessionId, oneProof(request.body), clientInfo(request));
    return { ok: true as const };
  });

  app.post('/api/me/passkeys/options', {
    config: session,
    preValidation: refuseBody,
    schema: { tags, summary: 'Options for registering a passkey (for navigator.credentials.create)', response: responses({ 200: WebAuthnOptionsSchema }) },
  }, async (request) => {
    const { accountId, sessionId } = sessionOf(request);
    return passkeyRegistrationOptions(deps, accountId, sessionId);
  });

  app.post('/api/me/passkeys', {
    config: session,
    schema: { tags, summary: 'Register a passkey with the authenticator\'s answer to the options', body: NewPasskeyBody, response: responses({ 201: PasskeySchema }) },
  }, async (request, reply) => {
    const { accountId, sessionId } = sessionOf(request);
    const input = { name: request.body.name, response: request.body.response as unknown as RegistrationResponseJSON };
    return reply.code(201).send(await registerPasskey(deps, accountId, sessionId, input, clientInfo(request)));
  });

  app.get('/api/me/passkeys', {
    schema: { tags, summary: "The account's passkeys", querystring: ListQuerySchema, response: responses({ 200: pageSchema(PasskeySchema) }) },
  }, async (request) => {
    const limit = request.query.limit ?? DEFAULT_PAGE_SIZE;
    const all = await listPasskeys(deps.db, accountIdOf(request));
    const cursor = request.query.cursor;
    return toPage(cursor === undefined ? all : all.filter((passkey) => passkey.id < cursor), limit);
  });

  app.patch('/api/me/passkeys/:id', {
    config: session,
    schema: { tags, summary: 'Rename a passkey', params: IdParamsSchema, body: RenamePasskeyBody, response: responses({ 200: PasskeySchema }) },
  }, async (request) => renameAccountPasskey(deps, sessionOf(request).accountId, request.params.id, request.body.name));

  app.delete('/api/me/passkeys/:id', {
    config: session,
    preValidation: refuseBody,
    schema: { tags, summary: 'Remove a passkey (needs a recent authentication)', params: IdParamsSchema, response: responses({ 204: Type.Null() }) },
  }, async (request, reply) => {
    requireRecentAuthentication(request, deps.clock.now());
    await removePasskey(deps, sessionOf(request).accountId, request.params.id, clientInfo(request));
    return reply.code(204).send(null);
  });

  app.post('/api/auth/login/second-factor/options', {
    config: { auth: 'none' },
    preValidation: refuseBody,
    schema: {
      tags,
      summary: 'Passkey options for the second step of a pending sign-in (for navigator.credentials.get)',
      response: responses({ 200: WebAuthnOptionsSchema }),
    },
  }, async (request) => secondStepPasskeyOptions(deps, readCookie(request, pendingCookieName(config))));

  app.post('/api/auth/login/second-factor', {
    config: { auth: 'none' },
    schema: {
      tags,
      summary: 'Complete a pending sign-in with a TOTP or recovery code, or a passkey; sets the session cookie',
      description: 'Needs the pending cookie that POST /api/auth/login set (5 minutes). Every attempt counts in the sign-in rate limit of the account.',
      body: SecondStepBody,
      response: responses({ 200: AccountResponse }),
    },
  }, async (request, reply) => {
    const { code, passkey } = request.body;
    if ((code === undefined) === (passkey === undefined)) throw invalidRequest('Send either code or passkey.');
    const input = passkey === undefined ? { code } : { passkey: passkey as unknown as AuthenticationResponseJSON };
    const signedIn = await completeSecondStep(deps, readCookie(request, pendingCookieName(config)), input, clientInfo(request));
    clearShortCookie(reply, config, pendingCookieName(config));
    setSessionCookie(reply, config, signedIn.sessionToken);
    return { account: signedIn.account };
  });

  app.post('/api/auth/passkey/options', {
    config: { auth: 'none' },
    preValidation: refuseBody,
    schema: { tags, summary: 'Options for signing in with a passkey alone (for navigator.credentials.get)', response: responses({ 200: WebAuthnOptionsSchema }) },
  }, async (_request, reply) => {
    const { options, browserToken } = await passkeySignInOptions(deps);
    setShortCookie(reply, config, passkeyCookieName(config), browserToken);
    return options;
  });

  app.post('/api/auth/passkey', {
    config: { auth: 'none' },
    schema: { tags, summary: 'Sign in with a passkey: no password, no second step; sets the session cookie', body: PasskeySignInBody, response: responses({ 200: AccountResponse }) },
  }, async (request, reply) => {
    const response = request.body.response as unknown as AuthenticationResponseJSON;
    const signedIn = await signInWithPasskey(deps, readCookie(request, passkeyCookieName(config)), response, clientInfo(request));
    clearShortCookie(reply, config, passkeyCookieName(config));
    setSessionCookie(reply, config, signedIn.sessionToken);
    return { account: signedIn.account };
  });
};
