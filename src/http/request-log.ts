/** Path parameters that are capabilities: whoever holds the URL holds the access. */
const SECRET_PARAMS = new Set([':token']);
/** Query parameters whose value is a credential whatever its shape (compared lower-cased, after percent-decoding). */
const SECRET_QUERY_PARAMS = new Set(['token', 'access_token', 'refresh_token', 'api_key', 'apikey', 'key', 'secret', 'client_secret', 'password', 'code']);
const REDACTED = '[redacted]';

/**
 * The shapes of the secrets this service issues, wherever they appear:
 * API keys and machine tokens (`tmk_`, `tmm_`, and any `tm?_` token of that
 * format: 32 + 6 base62 characters; 20 are enough to be a secret's part), signing
 * secrets (`whsec_` + base64), and capability, session and emailed-link tokens
 * (32 random bytes in base64url: 43 characters; any longer run of those characters too).
 */
const SECRET_SHAPES = /tm[a-z]_[0-9A-Za-z]{20,}|whsec_[0-9A-Za-z+/_=-]{20,}|[0-9A-Za-z_-]{43,}/g;
/** The shortest text SECRET_SHAPES can match. */
const SHORTEST_SECRET = 24;

function decoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * Replaces every secret-shaped run of `text` with [redacted], comparing after
 * percent-decoding (`%41` is an `A` to the router, so to us) but keeping the rest
 * exactly as sent. Each `%XX` is one character of the decoded text, so a match
 * maps back to the original characters.
 */
export function redactSecretShapes(text: string): string {
  if (text.length < SHORTEST_SECRET) return text;
  if (!text.includes('%')) return text.replace(SECRET_SHAPES, REDACTED);
  let plain = '';
  const starts: number[] = [];
  for (let i = 0; i < text.length; i++) {
    starts.push(i);
    const hex = text[i] === '%' ? text.slice(i + 1, i + 3) : '';
    if (/^[0-9A-Fa-f]{2}$/.test(hex)) {
      const code = parseInt(hex, 16);
      // A byte of a multi-byte character is never part of a secret: any non-secret character stands in for it.
      plain += code < 0x80 ? String.fromCharCode(code) : ' ';
      i += 2;
    } else {
      plain += text[i];
    }
  }
  starts.push(text.length);
  let result = '';
  let kept = 0;
  for (const match of plain.matchAll(SECRET_SHAPES)) {
    const from = starts[match.index]!;
    result += text.slice(kept, from) + REDACTED;
    kept = starts[match.index + match[0].length]!;
  }
  return result + text.slice(kept);
}

/**
 * The indices of `segments` (a path split on `/`) that remain once doubled
 * slashes and `.` segments are dropped and `..` segments resolved, in order:
 * `//live/./x` names the same place as `/live/x` to a reader, and to many proxies.
 */
function canonicalSegmentIndices(plain: string[]): number[] {
  const kept: number[] = [];
  for (let index = 1; index < plain.length; index++) {
    const segment = plain[index]!;
    if (segment === '' || segment === '.') continue;
    if (segment === '..') kept.pop();
    else kept.push(index);
  }
  return kept;
}

/**
 * What a log line may say about a request's URL. Capability tokens travel in
 * URLs (emailed links' `?token=`, live views' `/live/<token>`, inbound
 * webhooks' `/api/hooks/<token>`) and must not travel into logs, nor may an API
 * key a client put in a URL. Redacted are: a segment where the matched route has
 * a `:token` parameter; the segment after one of `capabilityPaths`, compared after
 * percent-decoding and with doubled slashes and dot segments resolved (for
 * requests no route matched, such as `//live/<token>`); the value of a query
 * parameter named like a credential; and anything shaped like a secret we issue,
 * anywhere in the URL. The rest is kept as sent, odd encodings included: they are
 * what an operator looks for.
 */
export function createUrlRedactor(capabilityPaths: readonly string[]): (url: string, route: string | undefined) => string {
  const prefixes = capabilityPaths.map((path) => path.split('/').slice(1));
  return (sentUrl, route) => {
    // Shapes first: a secret may span segments (base64 has '/'), and redacting its first segment alone would
    // leave the rest without its shape, in clear.
    const url = redactSecretShapes(sentUrl);
    const queryStart = url.indexOf('?');
    const path = queryStart === -1 ? url : url.slice(0, queryStart);
    const segments = path.split('/');
    const plain = segments.map(decoded);
    const secret = new Set<number>();
    const routeSegments = route?.split('/');
    if (routeSegments?.length === segments.length) {
      routeSegments.forEach((part, index) => SECRET_PARAMS.has(part) && secret.add(index));
    }
    const canonical = canonicalSegmentIndices(plain);
    for (const prefix of prefixes) {
      const capability = canonical[prefix.length];
      if (capability !== undefined && prefix.every((part, i) => plain[canonical[i]!] === part)) secret.add(capability);
    }
    const redactedPath = segments.map((segment, index) => (index > 0 && secret.has(index) ? REDACTED : segment)).join('/');
    if (queryStart === -1) return redactedPath;
    const query = url
      .slice(queryStart + 1)
      .split('&')
      .map((pair) => {
        const name = pair.split('=', 1)[0]!;
        return SECRET_QUERY_PARAMS.has(decoded(name).trim().toLowerCase()) ? `${name}=${REDACTED}` : pair;
      })
      .join('&');
    return `${redactedPath}?${query}`;
  };
}
