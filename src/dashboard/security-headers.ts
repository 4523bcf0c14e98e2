/**
 * Headers for every dashboard response. The pages load only their own scripts
 * and styles (no inline code, so an injected string cannot run), build the DOM
 * without HTML strings (Trusted Types enforce it), cannot be framed, and never
 * send the address, which may hold an emailed token, to another site.
 * Inline styles are allowed, as `<style>` elements and style attributes:
 * xterm.js (the machine's terminal) writes its measured cell size and colours
 * into `<style>` elements it creates, and a cell's 24-bit colour into its
 * style attribute. Trusted Types keep every markup string out of the DOM, so
 * only the dashboard's own scripts, through DOM calls, can set either.
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "style-src-elem 'self' 'unsafe-inline'",
  "style-src-attr 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "require-trusted-types-for 'script'",
  "trusted-types 'none'",
].join('; ');

export function dashboardSecurityHeaders(secureOrigin: boolean): Record<string, string> {
  return {
    'content-security-policy': CONTENT_SECURITY_POLICY,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'x-frame-options': 'DENY',
    'cross-origin-opener-policy': 'same-origin',
    'cross-origin-resource-policy': 'same-origin',
    'permissions-policy': 'camera=(), microphone=(), geolocation=(), payment=(), usb=()',
    ...(secureOrigin ? { 'strict-transport-security': 'max-age=31536000' } : {}),
  };
}
