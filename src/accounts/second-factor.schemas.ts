import { Type } from 'typebox';
import { Timestamp, NullableTimestamp } from '../http/schemas.ts';

const strict = { additionalProperties: false } as const;

const Code = Type.String({ minLength: 1, maxLength: 64, description: 'A 6-digit code from the authenticator app, or a recovery code' });
const AnyPassword = Type.String({ minLength: 1, maxLength: 1024 });

export const CodeBody = Type.Object({ code: Code }, strict);

/** Exactly one of the two (checked by the service: JSON Schema's oneOf would make a poor error message). */
export const ProofBody = Type.Object({ password: Type.Optional(AnyPassword), code: Type.Optional(Code) }, { ...strict, description: 'Either password or code' });

/**
 * A WebAuthn response as the browser's `PublicKeyCredential.toJSON()` (or
 * @simplewebauthn/browser) gives it. Open to fields browsers add; the library verifies what matters.
 */
export const WebAuthnResponse = Type.Object(
  {
    id: Type.String({ minLength: 1, maxLength: 1024 }),
    rawId: Type.String({ minLength: 1, maxLength: 1024 }),
    type: Type.Literal('public-key'),
    response: Type.Object({ clientDataJSON: Type.String({ maxLength: 16384 }) }, { additionalProperties: true }),
    clientExtensionResults: Type.Optional(Type.Object({}, { additionalProperties: true })),
    authenticatorAttachment: Type.Optional(Type.String({ maxLength: 64 })),
  },
  { additionalProperties: true },
);

export const SecondStepBody = Type.Object({ code: Type.Optional(Code), passkey: Type.Optional(WebAuthnResponse) }, { ...strict, description: 'Either code or passkey' });

export const PasskeySignInBody = Type.Object({ response: WebAuthnResponse }, strict);

const PasskeyName = Type.String({ minLength: 1, maxLength: 100 });

export const NewPasskeyBody = Type.Object({ name: PasskeyName, response: WebAuthnResponse }, strict);

export const RenamePasskeyBody = Type.Object({ name: PasskeyName }, strict);

export const PasskeySchema = Type.Object({ id: Type.String(), name: Type.String(), createdAt: Timestamp, lastUsedAt: NullableTimestamp });

export const TotpEnrolmentSchema = Type.Object({
  secret: Type.String({ description: 'Base32, for typing into an app by hand: shown only here' }),
  otpauthUrl: Type.String({ description: 'otpauth://totp/… (SHA-1, 6 digits, 30 s)' }),
  qrSvg: Type.String({ description: 'The otpauthUrl as a QR code, an SVG document' }),
});

export const RecoveryCodesSchema = Type.Object({
  recoveryCodes: Type.Array(Type.String(), { minItems: 10, maxItems: 10, description: 'Each works once; shown only here' }),
});

/** WebAuthn options, passed as they are to `navigator.credentials.create()` / `get()` (after decoding the base64url fields). */
export const WebAuthnOptionsSchema = Type.Object({ challenge: Type.String() }, { additionalProperties: true });
