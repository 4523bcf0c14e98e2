import type { MailMessage } from '../mail/mailer.ts';
import { escapeHtml } from '../shared/html.ts';

interface Holder {
  email: string;
  name: string;
}

/** Control and text-direction characters out of the greeting (names are checked at sign-up; this covers older ones). */
const displayName = (name: string) => name.replace(/[\p{Cc}\p{Zl}\p{Zp}\u202A-\u202E\u2066-\u2069]/gu, ' ').trim();

function compose(to: Holder, subject: string, lines: string[], link: string): MailMessage {
  const name = displayName(to.name);
  const text = [`Hello ${name},`, '', ...lines, '', link, '', '— Machine Platform'].join('\n');
  const html = [
    `<p>Hello ${escapeHtml(name)},</p>`,
    ...lines.map((line) => `<p>${escapeHtml(line)}</p>`),
    `<p><a href="${escapeHtml(link)}">Open billing</a></p>`,
    '<p>— Machine Platform</p>',
  ].join('\n');
  return { to: { name, address: to.email }, subject, text, html };
}

export function welcomeCreditMail(publicUrl: string, to: Holder, amount: string): MailMessage {
  return compose(to, 'Your welcome credit has arrived', [
    `Your email address is confirmed and your card is saved, so we added a welcome credit of ${amount} USD to your balance.`,
    'Machine time is metered per millisecond of running time; the balance and prices are on the Billing page.',
  ], `${publicUrl}/billing`);
}

export function lowBalanceMail(publicUrl: string, to: Holder, balance: string): MailMessage {
  return compose(to, 'Your balance is running low', [
    `Your balance is down to ${balance} USD. When it reaches zero, your running machines are stopped.`,
    'Top up on the Billing page to keep them running.',
  ], `${publicUrl}/billing`);
}

export function balanceEmptyMail(publicUrl: string, to: Holder, balance: string): MailMessage {
  return compose(to, 'Your balance is empty: machines stopped', [
    `Your balance reached ${balance} USD, so your running machines were stopped (reason balance-empty) and new ones cannot start.`,
    'Top up on the Billing page, then start your machines again.',
  ], `${publicUrl}/billing`);
}
