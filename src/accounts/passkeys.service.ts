import type {
  AuthenticationResponseJSON,
  PublicKeyCredentialCreationOptionsJSON,
  PublicKeyCredentialRequestOptionsJSON,
  RegistrationResponseJSON,
} from '@simplewebauthn/server';
import type { Kysely } from 'kysely';
import type { DB } from '../db/database.ts';
import { isUniqueViolation } from '../db/errors.ts';
import { inTransaction } from '../db/transaction.ts';
import type { Deps } from '../deps.ts';
import { invalidRequest, notFound } from '../http/errors.ts';
import type { RequestOrigin } from '../security-log/security-log.ts';
import { MINUTE, toIso, toIsoOrNull } from '../shared/clock.ts';
import { newId } from '../shared/ids.ts';
import type { PasskeysTable } from './accounts.tables.ts';
import { findAccountById } from './accounts.repository.ts';
import { deletePasskey, findPasskey, findPasskeyByCredentialId, insertPasskey, listPasskeyRows, recordPasskeyUse, renamePasskey } from './passkeys.repository.ts';
import { invalidPasskey } from './second-factor.errors.ts';
import { storeChallenge, takeChallenge } from './second-factor.repository.ts';
import { recordFactorChange } from './second-factor.service.ts';

/** Loaded at the first ceremony: about 25 MB that a service whose accounts use no passkey never needs. */
const webauthn = () => import('@simplewebauthn/server');

/** How long a ceremony's challenge is good for (the options' timeout says the same to the browser). */
export const CHALLENGE_LIFETIME_MS = 5 * MINUTE;
const RP_NAME = 'Machine Platform';
/**
 * EdDSA, ES256, RS256: what passkeys use. Named here rather than left to the
 * library, whose default first probes Web Crypto for post-quantum algorithms,
 * and on Node 24 that probe prints an ExperimentalWarning to stderr.
 */
const SUPPORTED_ALGORITHMS = [-8, -7, -257];

export interface PasskeyView {
  id: string;
  name: string;
  createdAt: string;
  lastUsedAt: string | null;
}

/** The relying party: PUBLIC_URL's host is the RP ID, its origin the only one a response may come from. */
function relyingParty(publicUrl: string): { rpID: string; origin: string } {
  const url = new URL(publicUrl);
  return { rpID: url.hostname, origin: url.origin };
}

const toView = (row: PasskeysTable): PasskeyView => ({ id: row.id, name: row.name, createdAt: toIso(row.created_at), lastUsedAt: toIsoOrNull(row.last_used_at) });

const transportsOf = (row: PasskeysTable): string[] => JSON.parse(row.transports) as string[];

/** Binds a registration ceremony to the session that started it. */
export const registrationBinding = (sessionId: string) => `register:${sessionId}`;

/** @throws AppError 404 (the account was deleted under a live credential). */
export async function passkeyRegistrationOptions(deps: Deps, accountId: string, sessionId: string): Promise<PublicKeyCredentialCreationOptionsJSON> {
  const account = await findAccountById(deps.db, accountId);
  if (account === undefined) throw notFound('The account');
  const existing = await listPasskeyRows(deps.db, accountId);
  const { generateRegistrationOptions } = await webauthn();
  const options = await generateRegistrationOptions({
    rpName: RP_NAME,
    rpID: relyingParty(deps.config.publicUrl).rpID,
    userName: account.email,
    userDisplayName: account.name,
    userID: new TextEncoder().encode(account.id),
    timeout: CHALLENGE_LIFETIME_MS,
    attestationType: 'none',
    supportedAlgorithmIDs: SUPPORTED_ALGORITHMS,
    excludeCredentials: existing.map((row) => ({ id: row.credential_id, transports: transportsOf(row) })),
    // Discoverable, so that the passkey can also sign in without the email and password.
    authenticatorSelection: { residentKey: 'required', userVerification: 'preferred' },
  });
  await storeChallenge(deps.db, registrationBinding(sessionId), options.challenge, deps.clock.now() + CHALLENGE_LIFETIME_MS);
  return options;
}

/**
 * Verifies the authenticator's answer to the session's challenge (which works once) and keeps the passkey.
 * @throws AppError 400 when the answer does not verify or the challenge is gone.
 */
export async function registerPasskey(
  deps: Deps,
  accountId: string,
  sessionId: string,
  input: { name: string; response: RegistrationResponseJSON },
  origin: RequestOrigin,
): Promise<PasskeyView> {
  const name = input.name.trim();
  if (name === '') throw invalidRequest('name must not be blank.');
  const now = deps.clock.now();
  const challenge = await takeChallenge(deps.db, registrationBinding(sessionId), now);
  if (challenge === undefined) throw invalidRequest('No passkey registration is in progress, or it expired: ask for new options.');
  const party = relyingParty(deps.config.publicUrl);
  const { verifyRegistrationResponse } = await webauthn();
  const verification = await verifyRegistrationResponse({
    response: input.response,
    expectedChallenge: challenge,
    expectedOrigin: party.origin,
    expectedRPID: party.rpID,
    requireUserVerification: false,
    supportedAlgorithmIDs: SUPPORTED_ALGORITHMS,
  }).catch(() => ({ verified: false as const }));
  if (!verification.verified) throw invalidRequest('The passkey could not be verified: ask for new options and try again.');
  const { credential } = verification.registrationInfo;
  const row: PasskeysTable = {
    id: newId('pk', now),
    account_id: accountId,
    credential_id: credential.id,
    public_key: Buffer.from(credential.publicKey).toString('base64url'),
    counter: credential.counter,
    transports: JSON.stringify(credential.transports ?? []),
    name,
    created_at: now,
    last_used_at: null,
  };
  try {
    await inTransaction(deps.database, async (tx) => {
      await insertPasskey(tx.db, row);
      await recordFactorChange(deps, tx, { accountId, change: 'passkey_added', at: now, origin, detail: { passkeyId: row.id, name }, mailDetail: name });
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw invalidRequest('This passkey is already registered.');
    throw error;
  }
  return toView(row);
}

export async function listPasskeys(db: Kysely<DB>, accountId: string): Promise<PasskeyView[]> {
  return (await listPasskeyRows(db, accountId)).map(toView);
}

/** @throws AppError 400 blank name, 404 unknown passkey (or another account's). */
export async function renameAccountPasskey(deps: Deps, accountId: string, id: string, rawName: string): Promise<PasskeyView> {
  const name = rawName.trim();
  if (name === '') throw invalidRequest('name must not be blank.');
  if (!(await renamePasskey(deps.db, accountId, id, name))) throw notFound('The passkey');
  return toView((await findPasskey(deps.db, accountId, id))!);
}

/**
 * Removes a passkey. The caller has checked recent authentication.
 * @throws AppError 404 unknown passkey (or another account's).
 */
export async function removePasskey(deps: Deps, accountId: string, id: string, origin: RequestOrigin): Promise<void> {
  const now = deps.clock.now();
  const removed = await inTransaction(deps.database, async (tx) => {
    const row = await findPasskey(tx.db, accountId, id);
    if (row === undefined || !(await deletePasskey(tx.db, accountId, id))) return false;
    await recordFactorChange(deps, tx, { accountId, change: 'passkey_removed', at: now, origin, detail: { passkeyId: id, name: row.name }, mailDetail: row.name });
    return true;
  });
  if (!removed) throw notFound('The passkey');
}

/**
 * Options for signing in with a passkey. With `accountId`, the account's own
 * passkeys are offered (the second step); without, the browser offers its
 * discoverable ones. The caller keeps the challenge (bound to a pending
 * sign-in, or sealed in the browser's cookie).
 */
export async function passkeyAuthenticationOptions(deps: Deps, accountId?: string): Promise<PublicKeyCredentialRequestOptionsJSON> {
  const allowCredentials = accountId === undefined ? undefined : (await listPasskeyRows(deps.db, accountId)).map((row) => ({ id: row.credential_id, transports: transportsOf(row) }));
  const { generateAuthenticationOptions } = await webauthn();
  return generateAuthenticationOptions({
    rpID: relyingParty(deps.config.publicUrl).rpID,
    timeout: CHALLENGE_LIFETIME_MS,
    userVerification: accountId === undefined ? 'required' : 'preferred',
    ...(allowCredentials ? { allowCredentials } : {}),
  });
}

/** Options for the second step, the challenge stored against the pending sign-in (`binding`), which only a right password makes. */
export async function boundAuthenticationOptions(deps: Deps, binding: string, accountId: string): Promise<PublicKeyCredentialRequestOptionsJSON> {
  const options = await passkeyAuthenticationOptions(deps, accountId);
  await storeChallenge(deps.db, binding, options.challenge, deps.clock.now() + CHALLENGE_LIFETIME_MS);
  return options;
}

export interface VerifiedAssertion {
  accountId: string;
  passkeyId: string;
  name: string;
  /** The authenticator's signature counter, for recordPasskeyUse once the caller accepts the use. */
  newCounter: number;
}

/**
 * Verifies a passkey's answer to `challenge`; writes nothing. Without a
 * password before it, the authenticator must have verified the user (PIN, biometrics).
 * @throws AppError 401 invalid_passkey
 */
export async function verifyPasskeyAssertion(
  deps: Deps,
  challenge: string,
  response: AuthenticationResponseJSON,
  expect: { accountId?: string; userVerification: boolean },
): Promise<VerifiedAssertion> {
  const row = await findPasskeyByCredentialId(deps.db, response.id);
  if (row === undefined || (expect.accountId !== undefined && row.account_id !== expect.accountId)) throw invalidPasskey();
  const party = relyingParty(deps.config.publicUrl);
  const { verifyAuthenticationResponse } = await webauthn();
  const verification = await verifyAuthenticationResponse({
    response,
    expectedChallenge: challenge,
    expectedOrigin: party.origin,
    expectedRPID: party.rpID,
    credential: { id: row.credential_id, publicKey: Buffer.from(row.public_key, 'base64url'), counter: row.counter, transports: transportsOf(row) },
    requireUserVerification: expect.userVerification,
  }).catch(() => ({ verified: false as const, authenticationInfo: undefined }));
  if (!verification.verified || verification.authenticationInfo === undefined) throw invalidPasskey();
  return { accountId: row.account_id, passkeyId: row.id, name: row.name, newCounter: verification.authenticationInfo.newCounter };
}

/**
 * Verifies a passkey's answer to the challenge stored for `binding` (which works once) and records its use.
 * @throws AppError 401 invalid_passkey
 */
export async function verifyBoundAssertion(
  deps: Deps,
  binding: string,
  response: AuthenticationResponseJSON,
  expect: { accountId: string; userVerification: boolean },
): Promise<VerifiedAssertion> {
  const now = deps.clock.now();
  const challenge = await takeChallenge(deps.db, binding, now);
  if (challenge === undefined) throw invalidPasskey();
  const verified = await verifyPasskeyAssertion(deps, challenge, response, expect);
  await recordPasskeyUse(deps.db, verified.passkeyId, verified.newCounter, now);
  return verified;
}
