/**
 * The one error type the API answers with. `code` is stable and documented;
 * `detail` is for people. The error handler turns it into RFC 9457 problem+json.
 */
export class AppError extends Error {
  readonly status: number;
  readonly code: string;
  readonly headers: Record<string, string>;

  constructor(status: number, code: string, detail: string, headers: Record<string, string> = {}) {
    super(detail);
    this.name = 'AppError';
    this.status = status;
    this.code = code;
    this.headers = headers;
  }
}

/** Titles per code: the short, stable summary of a problem type. */
export const PROBLEM_TITLES: Record<string, string> = {
  invalid_request: 'Invalid request',
  invalid_token: 'Invalid or expired link',
  unauthenticated: 'Authentication required',
  invalid_credentials: 'Invalid email or password',
  invalid_code: 'Invalid second-factor code',
  invalid_passkey: 'Passkey not accepted',
  sign_in_expired: 'Sign-in step expired',
  forbidden: 'Not allowed with this credential',
  cross_site: 'Cross-site request refused',
  reauthentication_required: 'Recent authentication required',
  not_found: 'Not found',
  request_timeout: 'Request timeout',
  email_taken: 'Email already registered',
  limit_reached: 'Limit reached',
  conflict: 'Conflict',
  delivery_pending: 'Delivery still pending',
  invalid_state: 'Not possible in the current state',
  payment_required: 'Payment required',
  card_declined: 'Card declined',
  payment_method_required: 'Payment method required',
  pool_empty: 'Warm pool empty',
  template_in_use: 'Template in use',
  capacity_exhausted: 'No host has room',
  invalid_signature: 'Invalid signature',
  replayed: 'Request already received',
  provider_error: 'Machine host failed',
  not_supported: 'Not offered by this machine',
  no_display: 'No display on this machine',
  preview_private: 'Preview is private',
  invalid_preview_link: 'Invalid or expired preview link',
  port_closed: 'Nothing listens on this port',
  machine_not_running: 'Machine not running',
  payload_too_large: 'Payload too large',
  unsupported_media_type: 'Unsupported media type',
  headers_too_large: 'Request headers too large',
  expectation_failed: 'Expectation not supported',
  rate_limited: 'Too many requests',
  internal_error: 'Internal server error',
  service_unavailable: 'Service unavailable',
};

export const invalidRequest = (detail: string) => new AppError(400, 'invalid_request', detail);

export const unauthenticated = (detail = 'Send a valid API key as "Authorization: Bearer tmk_…" or sign in.') =>
  new AppError(401, 'unauthenticated', detail, { 'www-authenticate': 'Bearer realm="api"' });

export const invalidBearerToken = () =>
  new AppError(401, 'unauthenticated', 'The bearer token is unknown, malformed or revoked.', {
    'www-authenticate': 'Bearer realm="api", error="invalid_token"',
  });

export const forbidden = (detail: string) => new AppError(403, 'forbidden', detail);

export const notFound = (what: string) => new AppError(404, 'not_found', `${what} was not found.`);

export const conflict = (code: string, detail: string) => new AppError(409, code, detail);

export const rateLimited = (retryAfterSeconds: number) =>
  new AppError(429, 'rate_limited', `Too many attempts. Try again in ${retryAfterSeconds} seconds.`, {
    'retry-after': String(retryAfterSeconds),
  });
