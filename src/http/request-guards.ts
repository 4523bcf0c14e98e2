import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError, invalidRequest } from './errors.ts';

/** A host as RFC 3986 writes it (a name, IPv4, or a bracketed IPv6 literal) and an optional port: nothing a URL parser reads as more. */
const HOST_SYNTAX = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~!$&'()*+,;=]+)(?::[0-9]{1,5})?$/;

const USABLE_HOSTS_KEPT = 64;

function isUsableHost(host: string): boolean {
  return HOST_SYNTAX.test(host) && URL.canParse(`http://${host}/`);
}

function hostHeaderCount(rawHeaders: string[]): number {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 4 && name.toLowerCase() === 'host') count += 1;
  }
  return count;
}

/** `/path?query`: relative to any valid base it always makes a URL. `//x`, `/\x` (an authority to URL parsers), `*` and absolute forms are checked. */
function isPlainPath(url: string): boolean {
  return url.charCodeAt(0) === 0x2f && url.charCodeAt(1) !== 0x2f && url.charCodeAt(1) !== 0x5c;
}

/**
 * The scheme, host and target of a request must make a URL, or handlers that
 * build one (the MCP transport) fail as a 500 on a client's mistake: an empty
 * or malformed Host, a trusted proxy's X-Forwarded-Proto that is not a scheme,
 * a target that does not parse. An HTTP/1.0 request may come without Host
 * (health checkers send them): it is taken as addressed to our own host.
 * @throws AppError 400 invalid_request.
 */
function assertBuildableUrl(request: FastifyRequest, ownHost: string, usableHosts: Set<string>): void {
  if (request.raw.headers.host === undefined && request.raw.httpVersionMajor === 1 && request.raw.httpVersionMinor === 0) {
    request.raw.headers.host = ownHost;
  }
  const host = request.host;
  if (host === '') throw invalidRequest('The request has no Host header.');
  // Node keeps the first of several Host headers; a proxy in front may have routed by another (RFC 9112: a 400).
  if (hostHeaderCount(request.raw.rawHeaders) > 1) throw invalidRequest('The request has more than one Host header.');
  if (!usableHosts.has(host)) {
    if (!isUsableHost(host)) throw invalidRequest('The Host header is not a valid host, with an optional port.');
    // Requests repeat the same few hosts: remembered, the check is one lookup. Bounded, as clients choose them.
    if (usableHosts.size >= USABLE_HOSTS_KEPT) usableHosts.clear();
    usableHosts.add(host);
  }
  const protocol = request.protocol;
  if (protocol !== 'http' && protocol !== 'https') throw invalidRequest('X-Forwarded-Proto must be http or https.');
  if (!isPlainPath(request.url) && !URL.canParse(request.url, `${protocol}://${host}`)) {
    throw invalidRequest('The request target is not a valid path or URL.');
  }
}

/** Codings this service decodes: none but the identity (bodies are read as they come). */
function namesOtherCoding(header: string | string[] | undefined, accepted: string): boolean {
  if (header === undefined) return false;
  const codings = (Array.isArray(header) ? header.join(',') : header).split(',');
  return codings.some((coding) => coding.trim().toLowerCase() !== accepted);
}

/**
 * A body compressed (Content-Encoding) or transfer-coded (anything but chunked,
 * which Node decodes) would otherwise be read as if it were plain: JSON that
 * fails to parse as a misleading 400, or a raw inbound webhook body signed over other bytes.
 * @throws AppError 415 unsupported_media_type, naming what is accepted.
 */
function assertReadableBody(request: FastifyRequest): void {
  const headers = request.raw.headers;
  if (namesOtherCoding(headers['content-encoding'], 'identity')) {
    throw new AppError(415, 'unsupported_media_type', 'This service does not decode Content-Encoding: send the body uncompressed.', { 'accept-encoding': 'identity' });
  }
  if (namesOtherCoding(headers['transfer-encoding'], 'chunked')) {
    throw new AppError(415, 'unsupported_media_type', 'This service takes no Transfer-Encoding but chunked.');
  }
}

/**
 * An onRequest hook, registered before any other: requests the service cannot
 * build a URL from, or whose body it cannot read, stop here as problem+json,
 * before authentication and before any handler.
 */
export function refuseUnreadableRequests(publicUrl: string) {
  const ownHost = new URL(publicUrl).host;
  const usableHosts = new Set<string>();
  return (request: FastifyRequest, _reply: FastifyReply, done: (error?: Error) => void): void => {
    try {
      assertBuildableUrl(request, ownHost, usableHosts);
      assertReadableBody(request);
    } catch (error) {
      return done(error as Error);
    }
    done();
  };
}
