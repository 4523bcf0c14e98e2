import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { SMTPServer } from 'smtp-server';

export interface ReceivedMail {
  to: string;
  subject: string;
  text: string;
  raw: string;
  /** The SMTP envelope's RCPT TO addresses: whom the server was asked to deliver to (SMTP only). */
  rcptTo?: string[];
}

/** Reads what a test needs from an RFC 5322 message: recipient, subject, decoded text/plain part. */
export function parseMail(raw: string): ReceivedMail {
  const unfolded = raw.replace(/\r\n/g, '\n');
  const [head = '', ...rest] = unfolded.split('\n\n');
  const header = (name: string) => new RegExp(`^${name}: (.*)$`, 'mi').exec(head.replace(/\n[ \t]+/g, ' '))?.[1]?.trim() ?? '';
  const body = rest.join('\n\n');
  const boundary = /boundary="([^"]+)"/.exec(head.replace(/\n[ \t]+/g, ' '))?.[1];
  const parts = boundary ? body.split(`--${boundary}`) : [`${head}\n\n${body}`];
  const textPart = parts.find((part) => /Content-Type: text\/plain/i.test(part)) ?? '';
  const [partHead = '', ...partBody] = textPart.replace(/^\n/, '').split('\n\n');
  let text = partBody.join('\n\n');
  if (/Content-Transfer-Encoding: base64/i.test(partHead)) text = Buffer.from(text, 'base64').toString('utf8');
  if (/Content-Transfer-Encoding: quoted-printable/i.test(partHead)) {
    text = Buffer.from(text.replace(/=\n/g, '').replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))), 'latin1').toString('utf8');
  }
  return { to: header('To'), subject: header('Subject'), text: text.trim(), raw };
}

export function linkIn(mail: ReceivedMail, path: '/verify-email' | '/reset-password'): { url: string; token: string } {
  const match = new RegExp(`(https?://\\S+${path}\\?token=([A-Za-z0-9_-]+))`).exec(mail.text);
  if (!match) throw new Error(`no ${path} link in mail: ${mail.text}`);
  return { url: match[1]!, token: match[2]! };
}

export async function readOutbox(dir: string): Promise<ReceivedMail[]> {
  const names = (await readdir(dir).catch(() => [] as string[])).filter((name) => name.endsWith('.eml')).sort();
  return Promise.all(names.map(async (name) => parseMail(await readFile(join(dir, name), 'utf8'))));
}

export interface SmtpInbox {
  url: string;
  messages: ReceivedMail[];
  /** Makes the server refuse every message (a failing mail server). */
  failing: boolean;
  /** Makes the server sit on every message until the returned function is called (a slow mail server). */
  hold(): () => void;
  to(address: string): ReceivedMail[];
  close(): Promise<void>;
}

/** A real SMTP server on 127.0.0.1 that keeps every message it accepts. */
export async function startSmtpServer(): Promise<SmtpInbox> {
  let held: Array<() => void> | null = null;
  const inbox: SmtpInbox = {
    url: '',
    messages: [],
    failing: false,
    hold: () => {
      held = [];
      return () => {
        const waiting = held ?? [];
        held = null;
        for (const accept of waiting) accept();
      };
    },
    to: (address) => inbox.messages.filter((mail) => mail.to.includes(address)),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        if (inbox.failing) return callback(new Error('mailbox unavailable'));
        const accept = () => {
          const rcptTo = session.envelope.rcptTo.map((recipient) => recipient.address);
          inbox.messages.push({ ...parseMail(Buffer.concat(chunks).toString('utf8')), rcptTo });
          callback();
        };
        if (held === null) accept();
        else held.push(accept);
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const address = server.server.address();
  if (address === null || typeof address === 'string') throw new Error('SMTP server has no port');
  inbox.url = `smtp://127.0.0.1:${address.port}`;
  return inbox;
}
