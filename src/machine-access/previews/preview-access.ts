import { createHmac, timingSafeEqual } from 'node:crypto';

/** What a preview host names: a port and a machine, as written (checked by the caller). */
export interface PreviewAddress {
  port: string;
  machineId: string;
}

/** A machine id as it is written in a host name: `mch-…`, since `_` is not a DNS host name's character. */
export const hostLabelOf = (machineId: string) => machineId.replace('_', '-');

const MACHINE_ID = /^mch_[0-9a-z]{26}$/;
export const isMachineId = (id: string) => MACHINE_ID.test(id);

/**
 * PREVIEW_URL's template, both ways: the origin of a machine's port, and
 * which port and machine a host names. Any host of the template's shape is a
 * preview host (one naming no valid port or machine is answered 400), so the
 * template's domain never serves anything else.
 */
export function previewHosts(template: string) {
  const url = new URL(template.replace('{port}', 'port-placeholder').replace('{id}', 'id-placeholder'));
  const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&');
  const parts = url.hostname.split(/(port-placeholder|id-placeholder)/);
  const order: Array<'port' | 'id'> = [];
  const pattern = parts
    .map((part) => {
      if (part === 'port-placeholder') return order.push('port'), '([^.]*?)';
      if (part === 'id-placeholder') return order.push('id'), '([^.]*?)';
      return literal(part);
    })
    .join('');
  const host = new RegExp(`^${pattern}$`);
  return {
    /** `{port}-{id}.localhost` and so on, for the templates' own hosts only. */
    parse(hostname: string): PreviewAddress | null {
      const match = host.exec(hostname);
      if (match === null) return null;
      const port = match[order.indexOf('port') + 1]!;
      const label = match[order.indexOf('id') + 1]!;
      return { port, machineId: label.replace(/^mch-/, 'mch_') };
    },
    originOf(machineId: string, port: number): string {
      return template.replace('{port}', String(port)).replace('{id}', hostLabelOf(machineId));
    },
  };
}

export type PreviewHosts = ReturnType<typeof previewHosts>;

/** A port as a host names it: 1–65,535 in plain digits, else null. */
export function portOf(text: string): number | null {
  if (!/^[1-9][0-9]{0,4}$/.test(text)) return null;
  const port = Number(text);
  return port <= 65_535 ? port : null;
}

/**
 * Every credential of a preview is an HMAC over the machine's current token
 * hash: a new machine token voids the preview token, every signed link and
 * every cookie made from one, with nothing stored.
 */
function mac(key: Buffer, ...fields: Array<string | number>): string {
  return createHmac('sha256', key).update(fields.join('\n')).digest('base64url');
}

function same(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

export const PREVIEW_TOKEN_PREFIX = 'tmp_';

/** The machine's preview token (`X-Preview-Token`), for every port of the machine. */
export function previewToken(key: Buffer, machineId: string, tokenHash: string): string {
  return `${PREVIEW_TOKEN_PREFIX}${mac(key, 'preview-token', machineId, tokenHash)}`;
}

export function isPreviewToken(key: Buffer, machineId: string, tokenHash: string, given: string): boolean {
  return same(given, previewToken(key, machineId, tokenHash));
}

/** The query parameter of a signed link: `<expiry in epoch seconds>.<signature>`. */
export const LINK_PARAMETER = 'preview-link';
/** The cookie a signed link leaves on its preview host (host-only: no Domain). */
export const PREVIEW_COOKIE = 'machine-preview';

/** A link's or a cookie's value: valid for this machine's port until `expiresAt` (epoch seconds). */
export function signedValue(key: Buffer, purpose: 'link' | 'cookie', machineId: string, port: number, tokenHash: string, expiresAt: number): string {
  return `${expiresAt}.${mac(key, purpose, machineId, port, tokenHash, expiresAt)}`;
}

/** Whether a link's or a cookie's value was signed for this port of this machine, and still holds at `nowSeconds`. */
export function checkSignedValue(key: Buffer, purpose: 'link' | 'cookie', machineId: string, port: number, tokenHash: string, value: string, nowSeconds: number): { valid: boolean; expiresAt: number } {
  const match = /^([0-9]{1,12})\.([A-Za-z0-9_-]{43})$/.exec(value);
  if (match === null) return { valid: false, expiresAt: 0 };
  const expiresAt = Number(match[1]);
  const valid = same(value, signedValue(key, purpose, machineId, port, tokenHash, expiresAt)) && expiresAt > nowSeconds;
  return { valid, expiresAt };
}

/** One cookie's value from a Cookie header, or null. */
export function cookieValue(header: string | undefined, name: string): string | null {
  if (header === undefined) return null;
  for (const part of header.split(';')) {
    const at = part.indexOf('=');
    if (at !== -1 && part.slice(0, at).trim() === name) return part.slice(at + 1).trim();
  }
  return null;
}

/** The Cookie header without the preview's own cookie (the app never sees it); undefined when nothing is left. */
export function withoutCookie(header: string, name: string): string | undefined {
  const kept = header.split(';').filter((part) => {
    const at = part.indexOf('=');
    return at === -1 || part.slice(0, at).trim() !== name;
  });
  const joined = kept.map((part) => part.trim()).filter((part) => part !== '').join('; ');
  return joined === '' ? undefined : joined;
}
