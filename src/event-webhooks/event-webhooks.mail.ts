import type { MailMessage } from '../mail/mailer.ts';

interface Recipient {
  email: string;
  name: string;
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
/** Line breaks, control and text-direction characters stay out of mails. */
const plain = (text: string) => text.replace(/[\p{Cc}\p{Zl}\p{Zp}\u202A-\u202E\u2066-\u2069]/gu, ' ').trim();

function compose(to: Recipient, subject: string, lines: string[]): MailMessage {
  const name = plain(to.name);
  const text = [`Hello ${name},`, '', ...lines, '', '— Machine Platform'].join('\n');
  const html = [`<p>Hello ${escapeHtml(name)},</p>`, ...lines.map((line) => `<p>${escapeHtml(line)}</p>`), '<p>— Machine Platform</p>'].join('\n');
  return { to: { name, address: to.email }, subject, text, html };
}

export interface FailingEndpoint {
  id: string;
  url: string;
  failingSince: string;
}

const days = (ms: number) => (ms % 86_400_000 === 0 ? `${ms / 86_400_000} day${ms === 86_400_000 ? '' : 's'}` : `${Math.round(ms / 60_000)} minutes`);

export function endpointFailingMail(publicUrl: string, to: Recipient, endpoint: FailingEndpoint, disableAfterMs: number): MailMessage {
  return compose(to, 'Your webhook endpoint is failing', [
    `Every delivery to your event webhook endpoint ${plain(endpoint.url)} (${endpoint.id}) has failed since ${endpoint.failingSince} (UTC).`,
    `If it keeps failing, it will be disabled ${days(disableAfterMs)} after its first failure. One successful delivery resets this.`,
    `The attempt log of each delivery shows the answers: ${publicUrl}/event-webhooks/${endpoint.id}`,
  ]);
}

export function endpointDisabledMail(publicUrl: string, to: Recipient, endpoint: FailingEndpoint, disableAfterMs: number): MailMessage {
  return compose(to, 'Your webhook endpoint was disabled', [
    `Your event webhook endpoint ${plain(endpoint.url)} (${endpoint.id}) has failed every delivery for ${days(disableAfterMs)} (since ${endpoint.failingSince} UTC), so it was disabled: nothing more is sent to it.`,
    'Once the receiver works again, enable the endpoint, then use "Recover failed since…" and "Replay missing since…" on its page to receive what it missed.',
    `${publicUrl}/event-webhooks/${endpoint.id}`,
  ]);
}
