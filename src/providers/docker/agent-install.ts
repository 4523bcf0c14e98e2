import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type Docker from 'dockerode';
import { pack } from 'tar-stream';
import { ConfigError } from '../../config.ts';
import { AGENT_VOLUME } from './container-spec.ts';
import { statusCodeOf } from './lifecycle.ts';

/** Built by `npm run machine-image` (scripts/build-agent.sh). */
export const AGENT_BINARY = fileURLToPath(new URL('../../../agent/bin/machine-agent', import.meta.url));

/**
 * Puts this service's agent into the agent volume, once per binary: the
 * binary under a name of its content's hash, then the link `agent` to it.
 * Through the engine's archive API into a container that is created and never
 * started, so an engine on another host (DOCKER_HOST over TCP or SSH) gets the
 * binary the same way as a local one. Running machines keep the binary they
 * started with (it is never overwritten); each picks up the link at its next
 * start, which is how an upgrade of the service upgrades the agent.
 * @throws ConfigError when the binary was not built.
 */
export async function installAgent(docker: Docker, helperImage: string, binaryPath = AGENT_BINARY): Promise<{ version: string }> {
  let binary: Buffer;
  try {
    binary = await readFile(binaryPath);
  } catch {
    throw new ConfigError(`MACHINE_IMAGE: the machine agent (${binaryPath}) is not built; build it with \`npm run machine-image\``);
  }
  const version = createHash('sha256').update(binary).digest('hex').slice(0, 16);
  const name = `agent-${version}`;
  const installer = await docker.createContainer({
    Image: helperImage,
    Cmd: ['/bin/true'],
    Entrypoint: [],
    Labels: { 'machine-platform.role': 'agent-installer' },
    HostConfig: { NetworkMode: 'none', Mounts: [{ Type: 'volume', Source: AGENT_VOLUME, Target: '/agent' }] },
  });
  try {
    const present = await installer.getArchive({ path: `/agent/${name}` }).then(
      (archive) => (archive.resume(), true),
      (error: unknown) => {
        if (statusCodeOf(error) === 404) return false;
        throw error;
      },
    );
    const archive = pack();
    if (!present) archive.entry({ name, mode: 0o755 }, binary);
    archive.entry({ name: 'agent', type: 'symlink', linkname: name });
    archive.finalize();
    await installer.putArchive(archive as unknown as NodeJS.ReadableStream, { path: '/agent' });
  } finally {
    await installer.remove({ force: true, v: false }).catch(() => {});
  }
  return { version };
}
