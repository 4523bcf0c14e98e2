import { createHash, createSign, generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';

/**
 * A software authenticator: a P-256 key per credential, authenticator data
 * and `none` attestation built by hand, so that tests produce the very
 * responses a browser would pass on, and @simplewebauthn/server verifies them
 * as it would a real passkey's. Discoverable credentials (it keeps the user handle).
 */

type CborValue = number | string | Uint8Array | Map<CborValue, CborValue> | { [key: string]: CborValue };

function cborHead(major: number, length: number): Buffer {
  if (length < 24) return Buffer.from([(major << 5) | length]);
  if (length < 0x100) return Buffer.from([(major << 5) | 24, length]);
  if (length < 0x10000) return Buffer.from([(major << 5) | 25, length >> 8, length & 0xff]);
  const head = Buffer.alloc(5);
  head[0] = (major << 5) | 26;
  head.writeUInt32BE(length, 1);
  return head;
}

/** The CBOR WebAuthn needs (RFC 8949): integers, byte and text strings, maps. */
export function cbor(value: CborValue): Buffer {
  if (typeof value === 'number') return value >= 0 ? cborHead(0, value) : cborHead(1, -1 - value);
  if (typeof value === 'string') {
    const bytes = Buffer.from(value, 'utf8');
    return Buffer.concat([cborHead(3, bytes.length), bytes]);
  }
  if (value instanceof Uint8Array) return Buffer.concat([cborHead(2, value.length), value]);
  const entries = value instanceof Map ? [...value.entries()] : Object.entries(value);
  return Buffer.concat([cborHead(5, entries.length), ...entries.flatMap(([key, item]) => [cbor(key), cbor(item)])]);
}

const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest();
const b64url = (data: Buffer | Uint8Array) => Buffer.from(data).toString('base64url');

const FLAG_USER_PRESENT = 0x01;
const FLAG_USER_VERIFIED = 0x04;
const FLAG_ATTESTED_CREDENTIAL = 0x40;

interface Credential {
  id: Buffer;
  privateKey: KeyObject;
  publicKey: KeyObject;
  rpId: string;
  userHandle: string;
  counter: number;
}

export interface SoftwareAuthenticator {
  /** Answers `navigator.credentials.create(options)` as JSON (RegistrationResponseJSON). */
  register(options: { challenge: string; rp: { id?: string }; user: { id: string } }, origin: string): Record<string, unknown>;
  /** Answers `navigator.credentials.get(options)` as JSON (AuthenticationResponseJSON) with the first credential allowed (or any, when none is listed). */
  authenticate(options: { challenge: string; rpId?: string; allowCredentials?: Array<{ id: string }> }, origin: string, overrides?: { userVerified?: boolean; credentialId?: string }): Record<string, unknown>;
  credentials: Credential[];
}

function coseKey(publicKey: KeyObject): Buffer {
  const jwk = publicKey.export({ format: 'jwk' });
  return cbor(new Map<CborValue, CborValue>([
    [1, 2], // kty: EC2
    [3, -7], // alg: ES256
    [-1, 1], // crv: P-256
    [-2, Buffer.from(jwk.x!, 'base64url')],
    [-3, Buffer.from(jwk.y!, 'base64url')],
  ]));
}

function authenticatorData(rpId: string, flags: number, counter: number, attested?: Buffer): Buffer {
  const count = Buffer.alloc(4);
  count.writeUInt32BE(counter);
  return Buffer.concat([sha256(rpId), Buffer.from([flags]), count, ...(attested ? [attested] : [])]);
}

export function softwareAuthenticator(): SoftwareAuthenticator {
  const credentials: Credential[] = [];
  return {
    credentials,
    register(options, origin) {
      const rpId = options.rp.id ?? new URL(origin).hostname;
      const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
      const credential: Credential = { id: randomBytes(32), privateKey, publicKey, rpId, userHandle: options.user.id, counter: 0 };
      credentials.push(credential);
      const length = Buffer.alloc(2);
      length.writeUInt16BE(credential.id.length);
      const attested = Buffer.concat([Buffer.alloc(16), length, credential.id, coseKey(publicKey)]);
      const authData = authenticatorData(rpId, FLAG_USER_PRESENT | FLAG_USER_VERIFIED | FLAG_ATTESTED_CREDENTIAL, 0, attested);
      const clientDataJSON = Buffer.from(JSON.stringify({ type: 'webauthn.create', challenge: options.challenge, origin, crossOrigin: false }));
      const attestationObject = cbor({ fmt: 'none', attStmt: {}, authData });
      return {
        id: b64url(credential.id),
        rawId: b64url(credential.id),
        type: 'public-key',
        response: { clientDataJSON: b64url(clientDataJSON), attestationObject: b64url(attestationObject), transports: ['internal'] },
        clientExtensionResults: {},
        authenticatorAttachment: 'platform',
      };
    },
    authenticate(options, origin, overrides = {}) {
      const allowed = options.allowCredentials?.map((item) => item.id) ?? [];
      const wanted = overrides.credentialId ?? allowed.find((id) => credentials.some((c) => b64url(c.id) === id));
      const credential = wanted === undefined ? credentials[0] : credentials.find((c) => b64url(c.id) === wanted);
      if (credential === undefined) throw new Error('the software authenticator holds no such credential');
      credential.counter += 1;
      const flags = FLAG_USER_PRESENT | (overrides.userVerified === false ? 0 : FLAG_USER_VERIFIED);
      const authData = authenticatorData(options.rpId ?? credential.rpId, flags, credential.counter);
      const clientDataJSON = Buffer.from(JSON.stringify({ type: 'webauthn.get', challenge: options.challenge, origin, crossOrigin: false }));
      const signature = createSign('sha256').update(Buffer.concat([authData, sha256(clientDataJSON)])).sign(credential.privateKey);
      return {
        id: b64url(credential.id),
        rawId: b64url(credential.id),
        type: 'public-key',
        response: { clientDataJSON: b64url(clientDataJSON), authenticatorData: b64url(authData), signature: b64url(signature), userHandle: credential.userHandle },
        clientExtensionResults: {},
        authenticatorAttachment: 'platform',
      };
    },
  };
}
