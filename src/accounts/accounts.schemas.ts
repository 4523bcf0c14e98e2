import { Type } from 'typebox';
import { PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from './passwords.ts';
import { Timestamp } from '../http/schemas.ts';

const Email = Type.String({ minLength: 1, maxLength: 320, description: 'Trimmed and lower-cased before use' });
const Password = Type.String({ minLength: PASSWORD_MIN_LENGTH, maxLength: PASSWORD_MAX_LENGTH });
/** Sign-in accepts any password length: a policy change must not lock anyone out. */
const AnyPassword = Type.String({ minLength: 1, maxLength: 1024 });
const EmailedToken = Type.String({ minLength: 1, maxLength: 200, description: 'The token from the emailed link' });

const strict = { additionalProperties: false } as const;

export const RegisterBody = Type.Object({ email: Email, password: Password, name: Type.String({ minLength: 1, maxLength: 100 }) }, strict);
export const SignInBody = Type.Object({ email: Email, password: AnyPassword }, strict);
export const TokenBody = Type.Object({ token: EmailedToken }, strict);
export const ForgotBody = Type.Object({ email: Email }, strict);
export const ResetBody = Type.Object({ token: EmailedToken, password: Password }, strict);
export const ChangePasswordBody = Type.Object({ currentPassword: AnyPassword, newPassword: Password }, strict);

export const AccountSchema = Type.Object({
  id: Type.String(),
  email: Type.String(),
  name: Type.String(),
  emailVerified: Type.Boolean(),
  createdAt: Timestamp,
});

export const AccountResponse = Type.Object({ account: AccountSchema });

export const SessionSchema = Type.Object({
  id: Type.String(),
  createdAt: Timestamp,
  lastSeenAt: Timestamp,
  userAgent: Type.Union([Type.String(), Type.Null()]),
  current: Type.Boolean({ description: 'The session making this request' }),
});

export const SecondFactorResponse = Type.Object({
  secondFactor: Type.Object({
    required: Type.Literal(true),
    methods: Type.Array(Type.Union([Type.Literal('totp'), Type.Literal('recovery'), Type.Literal('passkey')]), {
      description: 'What completes the sign-in at POST /api/auth/login/second-factor',
    }),
  }),
});

/** Signed in, or (an authenticator app is on) the second step, with a pending cookie and no session. */
export const SignInResponse = Type.Union([AccountResponse, SecondFactorResponse]);

export const SecondFactorSummarySchema = Type.Object({
  totp: Type.Boolean({ description: 'An authenticator app is on: password sign-in asks for a code' }),
  passkeys: Type.Integer({ description: 'Passkeys registered' }),
  recoveryCodesLeft: Type.Integer({ description: 'Unused recovery codes' }),
});

export const MeResponse = Type.Object({ account: AccountSchema, secondFactor: SecondFactorSummarySchema });
