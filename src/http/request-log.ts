/** Path parameters that are capabilities: whoever holds the URL holds the access. */
const SECRET_PARAMS = new Set([':token']);
const SECRET_QUERY_PARAMS = new Set(['token']);
const REDACTED = '[redacted]';

function decoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * What a log line may say about a request's URL. Capability tokens travel in
 * URLs (emailed links' `?token=`, live views' `/live/<token>`, inbound
 * webhooks' `/api/hooks/<token>`) and must not travel into logs. A segment is
 * redacted when the matched route has a `:token` parameter there, or, for
 * requests no route matched (`/live/<token>/extra`), when it follows one of
 * `capabilityPaths`, compared after percent-decoding (the router decodes too).
 * The rest is kept as sent, odd encodings included: they are what an operator looks for.
 */
export function createUrlRedactor(capabilityPaths: readonly string[]): (url: string, route: string | undefined) => string {
  const prefixes = capabilityPaths.map((path) => path.split('/').slice(1));
  return (url, route) => {
    const queryStart = url.indexOf('?');
    const path = queryStart === -1 ? url : url.slice(0, queryStart);
    const segments = path.split('/');
    const plain = segments.map(decoded);
    const routeSegments = route?.split('/');
    const secret = (index: number) =>
      (routeSegments?.length === segments.length && SECRET_PARAMS.has(routeSegments[index]!)) ||
      prefixes.some((prefix) => index === prefix.length + 1 && prefix.every((part, i) => plain[i + 1] === part));
    const redactedPath = segments.map((segment, index) => (index > 0 && secret(index) ? REDACTED : segment)).join('/');
    if (queryStart === -1) return redactedPath;
    const query = url
      .slice(queryStart + 1)
      .split('&')
      .map((pair) => {
        const name = pair.split('=', 1)[0]!;
        return SECRET_QUERY_PARAMS.has(decoded(name).toLowerCase()) ? `${name}=${REDACTED}` : pair;
      })
      .join('&');
    return `${redactedPath}?${query}`;
  };
}
