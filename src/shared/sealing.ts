import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { chmodSync, linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { SecretsConfig } from '../config.ts';

/**
 * Encryption at rest of what users hand the service to keep secret (a
 * machine's environment): AES-256-GCM under SECRETS_KEY, a fresh 12-byte nonce
 * per value, so a sealed value reveals nothing but its length and a changed
 * one fails to open instead of reading wrong.
 */
export interface Sealer {
  seal(plain: string): string;
  /** @throws Error when the value was sealed under another key or changed since. */
  open(sealed: string): string;
}

const VERSION = 'v1';

export function createSealer(key: Buffer): Sealer {
  if (key.length !== 32) throw new Error('the secrets key must be 32 bytes');
  return {
    seal(plain) {
      const nonce = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, nonce);
      const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      return [VERSION, nonce.toString('base64'), cipher.getAuthTag().toString('base64'), body.toString('base64')].join('.');
    },
    open(sealed) {
      const [version, nonce, tag, body] = sealed.split('.');
      if (version !== VERSION || nonce === undefined || tag === undefined || body === undefined) throw new Error('not a sealed value');
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(nonce, 'base64'));
      decipher.setAuthTag(Buffer.from(tag, 'base64'));
      return Buffer.concat([decipher.update(Buffer.from(body, 'base64')), decipher.final()]).toString('utf8');
    },
  };
}

/**
 * SECRETS_KEY when set; else the key generated once into the data folder
 * (readable by the service's user only), so an embedded deployment keeps its
 * secrets across restarts without configuration; else (a database in memory)
 * a key for this process only.
 */
export function loadSecretsKey(config: SecretsConfig): Buffer {
  if (config.key !== null) return Buffer.from(config.key, 'base64');
  if (config.keyFile === null) return randomBytes(32);
  try {
    const stored = Buffer.from(readFileSync(config.keyFile, 'utf8').trim(), 'base64');
    if (stored.length !== 32) throw new Error(`${config.keyFile} does not hold a 32-byte base64 key`);
    return stored;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const key = randomBytes(32);
  mkdirSync(dirname(config.keyFile), { recursive: true });
  // Written whole under a name of its own, then linked into place: a process starting at the same time reads
  // a complete key or none, and when two race the first link wins and both use its key.
  const draft = `${config.keyFile}.${process.pid}.${randomBytes(4).toString('hex')}`;
  writeFileSync(draft, `${key.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
  chmodSync(draft, 0o600);
  try {
    linkSync(draft, config.keyFile);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return loadSecretsKey(config);
  } finally {
    unlinkSync(draft);
  }
  return key;
}
