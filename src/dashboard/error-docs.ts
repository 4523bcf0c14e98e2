import { PROBLEM_TITLES } from '../http/errors.ts';
import { escapeHtml } from '../shared/html.ts';

interface ErrorDoc {
  status: number;
  description: string;
  fix: string;
}

/**
 * What each code means and what to do about it, in the order of the page; the
 * titles come from PROBLEM_TITLES. test/dashboard/pages.test.ts collects every
 * code the source can answer with and fails when one is missing here.
 */
const ERROR_DOCS: Record<string, ErrorDoc> = {
  invalid_request: {
    status: 400,
    description: 'The request was malformed: invalid JSON, a field of the wrong type, a missing required field, an unknown field, or a value out of range.',
    fix: 'Read `detail`: it names the field. Fix the request before sending it again.',
  },
  invalid_token: {
    status: 400,
    description: 'The token from an emailed link is unknown, expired or already used. Confirmation links last 24 hours, reset links 1 hour, and each works once.',
    fix: 'Request a new link: a new confirmation mail from the dashboard, or a new reset link from the forgot-password page.',
  },
  unauthenticated: {
    status: 401,
    description: 'No credential was sent, or the one sent is unknown, malformed or revoked. The response carries `WWW-Authenticate: Bearer`.',
    fix: 'Send `Authorization: Bearer <API key>`, or sign in to the dashboard again.',
  },
  invalid_credentials: {
    status: 401,
    description: 'The email address or the password is wrong. The answer is the same for both, so it does not reveal which addresses have an account.',
    fix: 'Check both, or reset the password.',
  },
  invalid_code: {
    status: 401,
    description: 'The second-factor code is wrong, was already used, or is too old: an authenticator-app code works once, within 30 seconds either side of its time; a recovery code works once. Each attempt counts against the sign-in rate limit of the account.',
    fix: 'Enter the code your authenticator app shows now (wait for the next one if you just used this one), or an unused recovery code.',
  },
  invalid_passkey: {
    status: 401,
    description: 'The passkey’s answer did not verify: an unknown or removed passkey, a passkey of another account, an expired or already used challenge, a signature for another site, or a passkey sign-in cookie this service did not issue or that was altered.',
    fix: 'Ask for new options (the challenge lasts 5 minutes and works once) and try again, or sign in with your password.',
  },
  sign_in_expired: {
    status: 401,
    description: 'The second step of a sign-in came without its pending sign-in, or after its 5 minutes: the password step is remembered only in this browser, for 5 minutes. Also a passkey sign-in answered more than 5 minutes after its options.',
    fix: 'Sign in again with your email address and password, or ask for new passkey options.',
  },
  invalid_signature: {
    status: 401,
    description: 'A request to an inbound webhook (the URL that starts a run) has no `Service-Signature` header, a malformed one, a signature that does not match the body, or a timestamp more than 5 minutes from now.',
    fix: 'Sign `<unix seconds>.<raw body>` with HMAC-SHA256 and the inbound webhook’s secret, and send `Service-Signature: t=<unix seconds>,v1=<hex>`, the same scheme as our event deliveries.',
  },
  forbidden: {
    status: 403,
    description: 'The credential is valid but not allowed here, for example a machine token used outside its own machine’s MCP and live-view endpoints.',
    fix: 'Use an API key for account-wide operations.',
  },
  cross_site: {
    status: 403,
    description: 'A request carrying the dashboard’s session cookie came from another site or origin (only the dashboard itself may use the session cookie), or a request to an MCP endpoint carried an `Origin` header naming another origin, whatever its credential (MCP transport security).',
    fix: 'Call the API with an API key (Bearer token) from other sites and from servers; MCP clients outside a browser send no `Origin`.',
  },
  reauthentication_required: {
    status: 403,
    description: 'Turning a second factor off, making new recovery codes and creating an API key from the dashboard need a recent authentication: a sign-in or a confirmation within the last 10 minutes.',
    fix: 'Confirm your password or a second-factor code with `POST /api/me/reauthenticate`, then repeat the request.',
  },
  not_found: {
    status: 404,
    description: 'No such route, or no such resource in this account. Resources of other accounts are reported as not found too.',
    fix: 'Check the path and the identifier.',
  },
  request_timeout: {
    status: 408,
    description: 'The request did not arrive in full in time, so the connection was closed.',
    fix: 'Send the request again; check the network between you and the service if it keeps happening.',
  },
  email_taken: {
    status: 409,
    description: 'An account with this email address already exists.',
    fix: 'Sign in, or reset the password if it is forgotten.',
  },
  payment_required: {
    status: 402,
    description: 'The balance is zero or below, so machines cannot be created, started or claimed (machines that were running when it ran out were stopped, reason `balance-empty`). A new account starts at zero. The detail names the next step for this account.',
    fix: 'A new account: confirm your email address and add a card (in test mode, `4242 4242 4242 4242`); the welcome credit then arrives at once. Afterwards: top up on the Billing page (`POST /api/billing/top-ups`).',
  },
  card_declined: {
    status: 402,
    description: 'The payment provider refused the card, or a charge to it. Nothing was saved or charged.',
    fix: 'Use another card (`PUT /api/billing/payment-method`), then try again.',
  },
  payment_method_required: {
    status: 409,
    description: 'A top-up needs a saved card, and the account has none.',
    fix: 'Add a card with `PUT /api/billing/payment-method`, then top up.',
  },
  limit_reached: {
    status: 409,
    description: 'The account reached a limit, for example 10 event webhook endpoints or 20 templates.',
    fix: 'Delete something you no longer need first.',
  },
  conflict: {
    status: 409,
    description: 'The request conflicts with the current state of the resource, for example a warm pool with a name already in use.',
    fix: 'Fetch the resource again and retry with its current state, or choose another name.',
  },
  invalid_state: {
    status: 409,
    description: 'The machine is not in a state that allows this action: starting a machine that is running, stopping one that is stopped, anything but reading on a destroyed one, or starting one that has expired. Also answered when another request changed the machine at the same moment.',
    fix: 'Read the machine again and act on its current `status`.',
  },
  pool_empty: {
    status: 409,
    description: 'A machine was requested from a warm pool that has no machine to hand out (its count is 0).',
    fix: 'Raise the pool’s count, or create the machine without a pool.',
  },
  template_in_use: {
    status: 409,
    description: 'A template was asked to be deleted while a warm pool makes its machines from it.',
    fix: 'Delete the pools that name the template (GET /api/pools shows each pool’s `template`), then delete the template.',
  },
  capacity_exhausted: {
    status: 409,
    description: 'No host of the service has room for a machine of this size now: every active host holds as many machines as its CPUs and memory allow (or is draining, or lost). Nothing was created or started.',
    fix: 'Try again later or with a smaller size, stop or destroy machines you no longer use; the operator can add a host (`npm run hosts -- add`).',
  },
  replayed: {
    status: 409,
    description: 'An inbound webhook received a signed request it has already received: each signed request starts one run, so a replay (or a retry of a request that succeeded) starts nothing.',
    fix: 'To start another run, sign a new request with the current time.',
  },
  delivery_pending: {
    status: 409,
    description: 'A retry was asked for a delivery that is still pending: its next attempt is already scheduled.',
    fix: 'Wait for the attempt; only a failed delivery can be retried by hand.',
  },
  payload_too_large: {
    status: 413,
    description: 'The request body is larger than 1 MiB.',
    fix: 'Send a smaller body.',
  },
  unsupported_media_type: {
    status: 415,
    description: 'The route takes JSON but the body was sent with another content type, the body was compressed (`Content-Encoding`) or transfer-coded with anything but `chunked`, which the service does not decode, or JSON came in a charset other than UTF-8.',
    fix: 'Send `Content-Type: application/json` and the body uncompressed, in UTF-8.',
  },
  expectation_failed: {
    status: 417,
    description: 'The request carried an `Expect` header other than `100-continue`, the only expectation the service meets.',
    fix: 'Send the request without that `Expect` header.',
  },
  rate_limited: {
    status: 429,
    description: 'Too many attempts in a short time (sign-in, sign-up and emailed links are limited per address and per IP).',
    fix: 'Wait the number of seconds in the `Retry-After` header.',
  },
  headers_too_large: {
    status: 431,
    description: 'The request headers are larger than the service accepts (16 KiB).',
    fix: 'Send fewer or smaller headers, for example fewer cookies.',
  },
  internal_error: {
    status: 500,
    description: 'Something failed on our side. The error is logged; the response never carries internals.',
    fix: 'Retry later. If it keeps happening, contact support with the time of the request.',
  },
  provider_error: {
    status: 502,
    description: 'The host that runs machines failed at what it was asked (boot, stop or destroy). The machine is now in status `error` and a `machine.error` event was sent.',
    fix: 'Start or destroy the machine to try again.',
  },
  not_supported: {
    status: 409,
    description: 'The machine’s provider does not offer this: the simulated provider has no files, processes or screen.',
    fix: 'Run the service with `MACHINE_PROVIDER=docker` (see “Real machines on Docker” in docs/machines.md) and use a machine created there.',
  },
  no_display: {
    status: 409,
    description: 'The machine has no display to take a picture of or act on: its image has none (the default image has one: Xvfb on :1), or the simulated provider runs it.',
    fix: 'Use the default machine image (`npm run machine-image`) with `MACHINE_PROVIDER=docker`, or an image with Xvfb, scrot and xdotool.',
  },
  preview_private: {
    status: 401,
    description: 'A preview host was asked for a private port (ports are private by default) without the machine’s preview token, a signed link’s cookie, or the port being public.',
    fix: 'Send `X-Preview-Token` (GET /api/machines/{id}/previews shows it), open a signed link (POST /api/machines/{id}/previews), or make the port public (PATCH /api/machines/{id}/previews/{port}).',
  },
  invalid_preview_link: {
    status: 401,
    description: 'A signed preview link has expired, its signature is not one this service made for that port and machine, or the machine token changed since (a new token voids every link and the preview token). No cookie was set.',
    fix: 'Ask the machine’s owner for a new link.',
  },
  port_closed: {
    status: 502,
    description: 'The machine runs, but nothing listens on the preview’s port inside it (on 127.0.0.1 or 0.0.0.0), or what listens there does not speak HTTP.',
    fix: 'Start the server in the machine on that port, then reload.',
  },
  machine_not_running: {
    status: 503,
    description: 'The preview’s machine is not running (stopped, starting, or in error): nothing can answer for it.',
    fix: 'Start the machine (POST /api/machines/{id}/start) and reload once it runs.',
  },
  service_unavailable: {
    status: 503,
    description: 'The service is shutting down, starting, or cannot reach its database.',
    fix: 'Retry after a short wait.',
  },
};

/** For a code with no entry in PROBLEM_TITLES yet: "delivery_pending" reads "Delivery pending". */
function titleFromCode(code: string): string {
  const words = code.replace(/_/g, ' ');
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** `code` spans in the prose above become <code>; everything else is escaped. */
function prose(text: string): string {
  return escapeHtml(text).replace(/`([^`]+)`/g, '<code>$1</code>');
}

/** The page problem+json `type` URIs point at: one anchor per code. */
export function renderErrorDocs(publicUrl: string): string {
  const codes = [...new Set([...Object.keys(ERROR_DOCS), ...Object.keys(PROBLEM_TITLES)])];
  const sections = codes.map((code) => {
    const title = PROBLEM_TITLES[code] ?? titleFromCode(code);
    const doc = ERROR_DOCS[code];
    const meta = doc ? `<p class="error-doc__status"><span class="badge badge--neutral badge--plain">HTTP ${doc.status}</span></p>` : '';
    const body = doc ? `<p>${prose(doc.description)}</p><p class="muted"><strong>What to do:</strong> ${prose(doc.fix)}</p>` : '';
    return `<section class="card error-doc" id="${escapeHtml(code)}" aria-labelledby="${escapeHtml(code)}-title">
  <h2 id="${escapeHtml(code)}-title"><a class="error-doc__anchor" href="#${escapeHtml(code)}">${escapeHtml(title)}</a> <code>${escapeHtml(code)}</code></h2>
  ${meta}${body}
</section>`;
  });
  const example = JSON.stringify(
    { type: `${publicUrl}/docs/errors#invalid_credentials`, title: PROBLEM_TITLES.invalid_credentials, status: 401, detail: 'The email address or password is wrong.', code: 'invalid_credentials' },
    null,
    2,
  );
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Error codes · Machine Platform</title>
<link rel="icon" href="/assets/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/assets/app.css">
</head>
<body>
<a class="skip-link" href="#main">Skip to content</a>
<header class="topbar"><div class="topbar__inner"><a class="brand" href="/"><img src="/assets/logo.svg" alt="" width="28" height="28"><span>Machine Platform</span></a></div></header>
<main id="main" class="page page--narrow" tabindex="-1">
<h1>Error codes</h1>
<p class="lead">Every error the API answers is an <a href="https://www.rfc-editor.org/rfc/rfc9457">RFC 9457</a> problem, sent as <code>application/problem+json</code>. Branch on <code>code</code>, which is stable; show <code>detail</code> to people.</p>
<pre class="code-block" aria-label="Example problem response">${escapeHtml(example)}</pre>
${sections.join('\n')}
</main>
</body>
</html>
`;
}
