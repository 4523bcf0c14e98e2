import { Type, type Static } from 'typebox';
import { NullableTimestamp, Timestamp } from '../http/schemas.ts';

const Amount = Type.String({ pattern: '^-?[0-9]+\\.[0-9]{6}$', description: 'USD, a decimal string with exactly six fractional digits' });

export const PaymentMethodSchema = Type.Object({
  brand: Type.String(),
  last4: Type.String(),
  expMonth: Type.Integer(),
  expYear: Type.Integer(),
  createdAt: Timestamp,
});

export const BillingSchema = Type.Object({
  balance: Amount,
  currency: Type.Literal('usd'),
  prices: Type.Object({ small: Amount, medium: Amount, large: Amount }, { description: 'USD per hour of running time, by machine size' }),
  pausedPrices: Type.Object({ small: Amount, medium: Amount, large: Amount }, { description: 'USD per hour of paused time, by machine size' }),
  paymentMethod: Type.Union([PaymentMethodSchema, Type.Null()]),
  welcomeCredit: Type.Object({
    amount: Amount,
    grantedAt: NullableTimestamp,
    missing: Type.Array(Type.Union([Type.Literal('email_confirmation'), Type.Literal('payment_method')])),
  }),
});

export const BillingSettingsSchema = Type.Object({
  enabled: Type.Boolean({ description: 'BILLING: false when machines are free here (no metering, no 402)' }),
  lowBalance: Amount,
  testMode: Type.Boolean({ description: 'The payment provider takes test cards only (the simulated provider)' }),
});

export const PaymentMethodBody = Type.Object(
  {
    number: Type.String({ pattern: '^[0-9]{12,19}$', description: 'Card number, digits only; never stored, logged or returned' }),
    expMonth: Type.Integer({ minimum: 1, maximum: 12 }),
    expYear: Type.Integer({ minimum: 1000, maximum: 9999, description: 'Four digits' }),
    cvc: Type.String({ pattern: '^[0-9]{3,4}$', description: '3 or 4 digits; never stored, logged or returned' }),
  },
  { additionalProperties: false },
);
export type PaymentMethodInput = Static<typeof PaymentMethodBody>;

export const TopUpBody = Type.Object(
  { amount: Type.String({ pattern: '^[0-9]{1,4}(\\.[0-9]{1,6})?$', description: 'USD, "5.00" to "1000.00"' }) },
  { additionalProperties: false },
);

export const TopUpHeaders = Type.Object({
  'idempotency-key': Type.Optional(Type.String({ description: '1 to 255 characters: a retried request with the same key answers the first result without charging again (kept 24 h)' })),
});

export const TopUpSchema = Type.Object({
  id: Type.String(),
  kind: Type.Literal('top_up'),
  amount: Amount,
  balanceAfter: Amount,
  createdAt: Timestamp,
});

export const TransactionSchema = Type.Object({
  id: Type.String(),
  kind: Type.Union([Type.Literal('welcome_credit'), Type.Literal('top_up'), Type.Literal('usage')]),
  amount: Amount,
  balanceAfter: Amount,
  machineId: Type.Union([Type.String(), Type.Null()]),
  periodStart: NullableTimestamp,
  periodEnd: NullableTimestamp,
  createdAt: Timestamp,
});

/** A statement line's id and cursor: its day, then the machine (usage) or the transaction (credit) it is about. */
export const STATEMENT_POSITION = '^([0-9]{4}-[0-9]{2}-[0-9]{2})/([a-z]+_[0-9a-z]{26})$';

export const StatementQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 50, description: 'Lines per page, 1 to 100' })),
    cursor: Type.Optional(Type.String({ pattern: STATEMENT_POSITION, description: 'nextCursor of the previous page' })),
  },
  { additionalProperties: false },
);

export const StatementLineSchema = Type.Object({
  id: Type.String({ description: '"<day>/<machine id>" for usage, "<day>/<transaction id>" for a credit; lines are listed by it, descending' }),
  day: Type.String({ description: 'The UTC day, YYYY-MM-DD' }),
  kind: Type.Union([Type.Literal('usage'), Type.Literal('welcome_credit'), Type.Literal('top_up')]),
  amount: { ...Amount, description: "Usage: the sum of the machine's charges that day (negative, as in the ledger), exactly; a credit: its amount" },
  machine: Type.Union([
    Type.Object({ id: Type.String(), name: Type.Union([Type.String(), Type.Null()]), size: Type.Union([Type.String(), Type.Null()]) }),
    Type.Null(),
  ], { description: 'Usage: the machine, its name and size as they are now' }),
  seconds: Type.Union([Type.Number(), Type.Null()], { description: 'Usage: the running time charged that day (milliseconds as fractions)' }),
  transaction: Type.Union([TransactionSchema, Type.Null()], { description: 'A credit: its ledger entry, as /api/billing/transactions lists it' }),
});

export const UsageQuery = Type.Object(
  {
    from: Type.Optional(Type.String({ format: 'date-time', description: 'Start (exclusive) of the period whose charges are counted; default: 30 days before `to`' })),
    to: Type.Optional(Type.String({ format: 'date-time', description: 'End (inclusive); default: now' })),
  },
  { additionalProperties: false },
);

export const UsageSchema = Type.Object({
  from: Timestamp,
  to: Timestamp,
  total: Amount,
  machines: Type.Array(
    Type.Object({
      machineId: Type.String(),
      name: Type.Union([Type.String(), Type.Null()]),
      size: Type.Union([Type.String(), Type.Null()]),
      seconds: Type.Number(),
      amount: Amount,
    }),
  ),
});
