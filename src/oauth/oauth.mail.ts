import type { MailMessage } from '../mail/mailer.ts';

interface Recipient {
  email: string;
  name: string;
}

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** Line breaks, control and text-direction characters: a client chooses its own name, and must not fake lines or reorder text with it. */
export function displayText(text: string, max = 100): string {
  const clean = text.replace(/[\p{Cc}\p{Zl}\p{Zp}\u202A-\u202E\u2066-\u2069]/gu, ' ').replace(/\s+/g, ' ').trim();
  return clean.length > max ? `${clean.slice(0, max - 1)}…` : clean;
}

/** The security notice: a new application was allowed to act for the account through MCP. */
export function applicationConnectedMail(publicUrl: string, to: Recipient, connected: { clientName: string; redirectHost: string; at: string }): MailMessage {
  const name = displayText(to.name);
  const lines = [
    `A new application was connected to your account at ${connected.at} (UTC): ${displayText(connected.clientName)} (${displayText(connected.redirectHost)}).`,
    'It can use your machines and event webhooks through MCP until you revoke it.',
    `If this was not you, revoke it now under Account → Connected applications (${publicUrl}/account/applications) and change your password.`,
  ];
  const text = [`Hello ${name},`, '', ...lines, '', '— Machine Platform'].join('\n');
  const html = [`<p>Hello ${escapeHtml(name)},</p>`, ...lines.map((line) => `<p>${escapeHtml(line)}</p>`), '<p>— Machine Platform</p>'].join('\n');
  return { to: { name, address: to.email }, subject: 'A new application was connected to your account', text, html };
}
