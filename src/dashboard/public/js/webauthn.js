// Passkeys in the browser: the API sends WebAuthn options as JSON (base64url
// for the binary fields, as @simplewebauthn/server writes them) and takes the
// browser's answer back as JSON. The browser's own JSON helpers do the
// conversion where they exist; the few fields are converted here otherwise.

/** @typedef {Record<string, any>} Json */

/** Whether this browser can use passkeys at all (a secure context with WebAuthn). */
export function passkeysSupported() {
  return window.isSecureContext && typeof window.PublicKeyCredential === 'function' && typeof navigator.credentials?.create === 'function';
}

/**
 * Creates a passkey from registration options.
 * @param {Json} options  PublicKeyCredentialCreationOptionsJSON
 * @returns {Promise<Json>} the RegistrationResponseJSON to send back
 * @throws {PasskeyError} when the person cancels or the authenticator refuses
 */
export async function createPasskey(options) {
  const Credential = /** @type {any} */ (PublicKeyCredential);
  const publicKey = typeof Credential.parseCreationOptionsFromJSON === 'function'
    ? Credential.parseCreationOptionsFromJSON(options)
    : {
      ...options,
      challenge: fromBase64url(options.challenge),
      user: { ...options.user, id: fromBase64url(options.user.id) },
      excludeCredentials: (options.excludeCredentials ?? []).map(descriptor),
    };
  const credential = await ask(() => navigator.credentials.create({ publicKey }));
  return toJson(credential);
}

/**
 * Signs a challenge with a passkey.
 * @param {Json} options  PublicKeyCredentialRequestOptionsJSON
 * @returns {Promise<Json>} the AuthenticationResponseJSON to send back
 * @throws {PasskeyError} when the person cancels or no passkey fits
 */
export async function usePasskey(options) {
  const Credential = /** @type {any} */ (PublicKeyCredential);
  const publicKey = typeof Credential.parseRequestOptionsFromJSON === 'function'
    ? Credential.parseRequestOptionsFromJSON(options)
    : { ...options, challenge: fromBase64url(options.challenge), allowCredentials: (options.allowCredentials ?? []).map(descriptor) };
  const credential = await ask(() => navigator.credentials.get({ publicKey }));
  return toJson(credential);
}

/** What went wrong with a passkey, in a sentence for people. */
export class PasskeyError extends Error {
  /** @param {string} message @param {boolean} cancelled */
  constructor(message, cancelled) {
    super(message);
    this.name = 'PasskeyError';
    this.cancelled = cancelled;
  }
}

/**
 * @param {() => Promise<Credential | null>} call
 * @returns {Promise<PublicKeyCredential>}
 */
async function ask(call) {
  let credential;
  try {
    credential = await call();
  } catch (error) {
    const name = error instanceof DOMException ? error.name : '';
    if (name === 'InvalidStateError') throw new PasskeyError('This device already holds a passkey for your account.', false);
    if (name === 'NotAllowedError' || name === 'AbortError') throw new PasskeyError('The passkey request was cancelled or timed out. Try again.', true);
    if (name === 'SecurityError') throw new PasskeyError('Passkeys do not work on this address: open the dashboard at its own address.', false);
    throw new PasskeyError('The browser could not use a passkey. Try again, or use another way.', false);
  }
  if (!(credential instanceof PublicKeyCredential)) throw new PasskeyError('The browser returned no passkey. Try again.', true);
  return credential;
}

/** @param {Json} item */
function descriptor(item) {
  return { ...item, id: fromBase64url(item.id) };
}

/** @param {PublicKeyCredential} credential @returns {Json} */
function toJson(credential) {
  const native = /** @type {any} */ (credential);
  if (typeof native.toJSON === 'function') return native.toJSON();
  const response = /** @type {any} */ (credential.response);
  /** @type {Json} */
  const json = { clientDataJSON: toBase64url(response.clientDataJSON) };
  if ('attestationObject' in response) {
    json.attestationObject = toBase64url(response.attestationObject);
    if (typeof response.getTransports === 'function') json.transports = response.getTransports();
  } else {
    json.authenticatorData = toBase64url(response.authenticatorData);
    json.signature = toBase64url(response.signature);
    if (response.userHandle) json.userHandle = toBase64url(response.userHandle);
  }
  return {
    id: credential.id,
    rawId: toBase64url(credential.rawId),
    type: credential.type,
    response: json,
    authenticatorAttachment: credential.authenticatorAttachment ?? undefined,
    clientExtensionResults: credential.getClientExtensionResults(),
  };
}

/** @param {string} text @returns {ArrayBuffer} */
function fromBase64url(text) {
  const base64 = text.replace(/-/g, '+').replace(/_/g, '/').padEnd(Math.ceil(text.length / 4) * 4, '=');
  const bytes = Uint8Array.from(atob(base64), (char) => char.charCodeAt(0));
  return bytes.buffer;
}

/** @param {ArrayBuffer} buffer */
function toBase64url(buffer) {
  let binary = '';
  for (const byte of new Uint8Array(buffer)) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}
