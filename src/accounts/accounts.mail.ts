import type { MailMessage } from '../mail/mailer.ts';

interface Recipient {
  email: string;
  name: string;
}

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** Line breaks, control and text-direction characters: what could fake lines or reorder text in a mail. */
export const UNSAFE_NAME_CHARACTERS = /[\p{Cc}\p{Zl}\p{Zp}\u202A-\u202E\u2066-\u2069]/u;

/** Registration refuses such names; this keeps names stored before that rule out of mails too. */
function displayName(name: string): string {
  return name.replace(new RegExp(UNSAFE_NAME_CHARACTERS.source, 'gu'), ' ').trim();
}

function compose(to: Recipient, subject: string, lines: string[], link?: { url: string; label: string }): MailMessage {
  const name = displayName(to.name);
  const text = [`Hello ${name},`, '', ...lines, ...(link ? ['', link.url] : []), '', '— Machine Platform'].join('\n');
  const html = [
    `<p>Hello ${escapeHtml(name)},</p>`,
    ...lines.map((line) => `<p>${escapeHtml(line)}</p>`),
    ...(link ? [`<p><a href="${escapeHtml(link.url)}">${escapeHtml(link.label)}</a></p>`] : []),
    '<p>— Machine Platform</p>',
  ].join('\n');
  return { to: { name, address: to.email }, subject, text, html };
}

export function verificationMail(publicUrl: string, to: Recipient, token: string): MailMessage {
  return compose(
    to,
    'Confirm your email address',
    ['Confirm your email address by opening the link below. It works once and expires in 24 hours.', 'If you did not create an account, ignore this mail.'],
    { url: `${publicUrl}/verify-email?token=${encodeURIComponent(token)}`, label: 'Confirm email address' },
  );
}

export function passwordResetMail(publicUrl: string, to: Recipient, token: string): MailMessage {
  return compose(
    to,
    'Reset your password',
    ['Someone asked to reset the password of your account. Open the link below to choose a new one. It works once and expires in 1 hour.', 'If it was not you, ignore this mail: your password stays as it is.'],
    { url: `${publicUrl}/reset-password?token=${encodeURIComponent(token)}`, label: 'Choose a new password' },
  );
}

export function passwordChangedMail(publicUrl: string, to: Recipient, how: 'changed' | 'reset', at: string): MailMessage {
  return compose(to, 'Your password was changed', [
    `The password of your account was ${how} at ${at} (UTC), and every other session was signed out.`,
    `If this was not you, reset your password now at ${publicUrl}/forgot-password and review your API keys.`,
  ]);
}

/** The changes to an account's second factors that its holder is told of by mail. */
export type FactorChange = 'totp_enabled' | 'totp_disabled' | 'passkey_added' | 'passkey_removed' | 'recovery_codes_generated' | 'recovery_code_used';

const FACTOR_CHANGE_TEXT: Record<FactorChange, { subject: string; line: string }> = {
  totp_enabled: { subject: 'Two-factor authentication was turned on', line: 'An authenticator app was set up as the second factor of your account' },
  totp_disabled: { subject: 'Two-factor authentication was turned off', line: 'The authenticator app was removed from your account: signing in now needs only the password' },
  passkey_added: { subject: 'A passkey was added to your account', line: 'A passkey was added to your account' },
  passkey_removed: { subject: 'A passkey was removed from your account', line: 'A passkey was removed from your account' },
  recovery_codes_generated: { subject: 'New recovery codes were made', line: 'A new set of recovery codes was made for your account, and the earlier codes stopped working' },
  recovery_code_used: { subject: 'A recovery code was used', line: 'One of your recovery codes was used to sign in or confirm your identity' },
};

export function factorChangedMail(publicUrl: string, to: Recipient, change: FactorChange, at: string, detail: string | undefined): MailMessage {
  const text = FACTOR_CHANGE_TEXT[change];
  return compose(to, text.subject, [
    `${text.line}${detail ? ` (${detail})` : ''} at ${at} (UTC).`,
    `If this was not you, reset your password now at ${publicUrl}/forgot-password, then review your second factors and the security log in the dashboard.`,
  ]);
}
