import { mkdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Transporter } from 'nodemailer';
import type SMTPTransport from 'nodemailer/lib/smtp-transport';
import type StreamTransport from 'nodemailer/lib/stream-transport';

export interface Recipient {
  name: string;
  address: string;
}

export interface MailMessage {
  /**
   * An object, never a string: nodemailer parses a string as an address list,
   * so `a,victim@example.org` would mail the victim.
   */
  to: Recipient;
  subject: string;
  text: string;
  html: string;
}

export interface Mailer {
  send(message: MailMessage): Promise<void>;
  close(): void;
}

export interface MailerOptions {
  smtpUrl: string | null;
  mailDir: string;
  from: string;
}

const SMTP_TIMEOUT_MS = 10_000;

/** Connecting, the greeting and the conversation each get SMTP_TIMEOUT_MS: the longest one send takes. */
export const LONGEST_SEND_MS = 3 * SMTP_TIMEOUT_MS;

/**
 * The text part goes out as 8bit UTF-8 rather than nodemailer's quoted-printable,
 * which would fold an emailed link across lines and write its `=` as `=3D`: the
 * link must stand whole in the text part for people and tools that read it.
 */
function composed(message: MailMessage, from: string) {
  const text = message.text.replace(/\r?\n/g, '\r\n');
  return {
    from,
    to: { name: message.to.name, address: message.to.address },
    subject: message.subject,
    html: message.html,
    // Base64 keeps a mangled second copy of the link out of the raw message.
    textEncoding: 'base64' as const,
    text: { raw: `Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n${text}` },
  };
}

/** SMTP when SMTP_URL is set; otherwise each mail is an RFC 5322 `.eml` file in MAIL_DIR. */
export function createMailer(options: MailerOptions): Mailer {
  return options.smtpUrl ? smtpMailer(options.smtpUrl, options.from) : outboxMailer(options.mailDir, options.from);
}

/**
 * A nodemailer transport made at the first mail: nodemailer is loaded then, not at start-up (most processes send
 * no mail for a long while; issue 42). `close()` closes it if it was made.
 */
function lazyTransport<T extends Transporter<unknown>>(make: (nodemailer: (typeof import('nodemailer'))['default']) => T) {
  let transport: Promise<T> | null = null;
  let made: T | null = null;
  return {
    get: () => (transport ??= import('nodemailer').then((module) => (made = make(module.default)))),
    close: () => made?.close(),
  };
}

function smtpMailer(smtpUrl: string, from: string): Mailer {
  const transport = lazyTransport((nodemailer) => nodemailer.createTransport({
    url: smtpUrl,
    connectionTimeout: SMTP_TIMEOUT_MS,
    greetingTimeout: SMTP_TIMEOUT_MS,
    socketTimeout: SMTP_TIMEOUT_MS,
  } satisfies SMTPTransport.Options));
  return {
    send: async (message) => {
      await (await transport.get()).sendMail(composed(message, from));
    },
    close: transport.close,
  };
}

function outboxMailer(mailDir: string, from: string): Mailer {
  const transport = lazyTransport((nodemailer) => nodemailer.createTransport({ streamTransport: true, buffer: true, newline: 'unix' } satisfies StreamTransport.Options));
  let ready: Promise<unknown> | null = null;
  return {
    send: async (message) => {
      ready ??= mkdir(mailDir, { recursive: true });
      await ready;
      const info = await (await transport.get()).sendMail(composed(message, from));
      const name = `${Date.now()}-${randomBytes(4).toString('hex')}.eml`;
      // Written under a temporary name and renamed, so a reader never sees half a mail.
      const temporary = join(mailDir, `.${name}.tmp`);
      await writeFile(temporary, info.message as Buffer);
      await rename(temporary, join(mailDir, name));
    },
    close: transport.close,
  };
}

export function defaultFromAddress(publicUrl: string): string {
  return `"Machine Platform" <no-reply@${new URL(publicUrl).hostname}>`;
}
