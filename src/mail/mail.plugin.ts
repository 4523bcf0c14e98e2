import fp from 'fastify-plugin';
import { createMailer, defaultFromAddress, type Mailer } from './mailer.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** Sends mail; domains send it from jobs, so a mail survives a crash and a failing SMTP server. */
    mailer: Mailer;
  }
}

/** The mailer of SMTP when SMTP_URL is set, `.eml` files in MAIL_DIR otherwise (or the one given, in tests). */
export const mailPlugin = fp<{ mailer?: Mailer }>(
  async (app, options) => {
    const { config } = app.deps;
    const mailer = options.mailer ?? createMailer({ smtpUrl: config.smtpUrl, mailDir: config.mailDir, from: defaultFromAddress(config.publicUrl) });
    app.decorate('mailer', mailer);
    app.addHook('onClose', async () => mailer.close());
  },
  { name: 'mail', dependencies: ['core'] },
);
