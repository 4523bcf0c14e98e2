import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';

/** Whether `openssl` can be run here (Debian has it; the tests that need it say so when it is missing). */
export async function hasOpenssl(): Promise<boolean> {
  return promisify(execFile)('openssl', ['version']).then(() => true, () => false);
}

/**
 * A self-signed certificate for 127.0.0.1 and localhost, made with the
 * command of docs/webhooks.md ("Receive webhooks locally"): `key.pem` and `cert.pem` in `dir`.
 */
export async function makeSelfSignedCertificate(dir: string): Promise<{ key: string; cert: string }> {
  const key = join(dir, 'key.pem');
  const cert = join(dir, 'cert.pem');
  await promisify(execFile)('openssl', [
    'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '30', '-subj', '/CN=localhost',
    '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1', '-keyout', key, '-out', cert,
  ]);
  return { key, cert };
}
