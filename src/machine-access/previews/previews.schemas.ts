import { Type } from 'typebox';
import { Timestamp } from '../../http/schemas.ts';
import { PREVIEW_LINK_SECONDS } from './previews.service.ts';

/** What the preview routes take and answer; the preview tools (preview-tools.ts) take PreviewLinkBody too. */

const Port = Type.Integer({ minimum: 1, maximum: 65_535, description: 'A TCP port inside the machine' });

export const PreviewLinkBody = Type.Object(
  {
    port: { ...Port, description: 'The TCP port a server listens on inside the machine (on 127.0.0.1 or 0.0.0.0)' },
    expiresInSeconds: Type.Optional(
      Type.Integer({
        minimum: PREVIEW_LINK_SECONDS.min,
        maximum: PREVIEW_LINK_SECONDS.max,
        default: PREVIEW_LINK_SECONDS.default,
        description: `How long the signed link works (default ${PREVIEW_LINK_SECONDS.default})`,
      }),
    ),
  },
  { additionalProperties: false },
);

export const PreviewLinkSchema = Type.Object({
  url: Type.String({ description: 'Opens the port’s preview: it leaves a cookie for that preview host only, then goes to the URL without the signature' }),
  expiresAt: Timestamp,
});

const PublicPortSchema = Type.Object({ port: Port, url: Type.String({ description: 'The port’s preview URL' }) });

export const PreviewSettingsSchema = Type.Object({
  previewToken: Type.Union([Type.String(), Type.Null()], {
    description: 'Send as X-Preview-Token to open any port’s preview; a new machine token makes a new one. Null for a machine without a machine token (waiting in a pool)',
  }),
  urlTemplate: Type.String({ description: 'The preview URL of a port, {port} to be replaced' }),
  publicPorts: Type.Array(PublicPortSchema, { description: 'Ports whose preview answers anyone' }),
});

export const PortVisibilitySchema = Type.Object({ port: Port, public: Type.Boolean(), url: Type.String() });

