import { errors } from 'oidc-provider';

/** Hosts an http redirect may name: the client's own machine (RFC 8252 section 7.3; any port, the client picks one when it starts). */
const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * The MCP authorization specification (Communication Security): "All
 * redirect URIs MUST be either localhost or use HTTPS". An http redirect to
 * any other host would carry the authorization code across the network in
 * the clear. A native app's private-use scheme (`com.example.app:/callback`,
 * RFC 8252 section 7.1) is neither, and is refused as well: any app can claim
 * such a scheme, and the specification leaves no room for it.
 */
export function isAllowedRedirectUri(uri: string): boolean {
  const url = URL.parse(uri);
  if (url === null) return false;
  return url.protocol === 'https:' || (url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname));
}

/**
 * Checks the `redirect_uris` of a client: oidc-provider calls it for every
 * client it builds, registered (RFC 7591) or described by a Client ID Metadata
 * Document, so both are held to the same rule. Values that are not a list of
 * strings are left to the library's own checks, which run next.
 * @throws errors.InvalidClientMetadata, which oidc-provider answers as `invalid_redirect_uri`.
 */
export function assertAllowedRedirectUris(redirectUris: unknown): void {
  if (!Array.isArray(redirectUris)) return;
  for (const uri of redirectUris) {
    if (typeof uri === 'string' && !isAllowedRedirectUri(uri)) {
      // The library names the error by this prefix: a description starting with "redirect_uris" is `invalid_redirect_uri`.
      throw new errors.InvalidClientMetadata(`redirect_uris must use https, or http on localhost, 127.0.0.1 or [::1] (MCP authorization): ${uri} does not`);
    }
  }
}
