const UNSAFE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export interface OriginHeaders {
  origin?: string | undefined;
  'sec-fetch-site'?: string | undefined;
}

/**
 * The origin rule for requests that carry the session cookie (CONTRACT 4):
 * refused when the browser says the request is cross-site or same-site but
 * another origin, when Origin names another origin, or when an unsafe method
 * arrives with neither header (a client that hides where it comes from).
 */
export function comesFromOwnOrigin(method: string, headers: OriginHeaders, ownOrigin: string): boolean {
  const fetchSite = headers['sec-fetch-site'];
  if (fetchSite === 'cross-site' || fetchSite === 'same-site') return false;
  const origin = headers.origin;
  if (origin !== undefined && origin !== ownOrigin) return false;
  if (origin === undefined && fetchSite === undefined && UNSAFE_METHODS.has(method)) return false;
  return true;
}
