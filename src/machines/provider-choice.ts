import { existsSync } from 'node:fs';
import type { FastifyBaseLogger } from 'fastify';
import { DEFAULT_MACHINE_IMAGE, type MachinesConfig } from '../config.ts';
import type { Clock } from '../shared/clock.ts';
import type { Sealer } from '../shared/sealing.ts';
import { dockerHostAddress, type MachineProvider } from '../providers/provider.ts';
import { createSimulatedProvider } from '../providers/simulated.provider.ts';
import type { ImageBuild, MachineImageState } from '../providers/docker/image-build.ts';

/** How long MACHINE_PROVIDER=auto waits for the engine's answer at start-up. */
const ENGINE_PING_MS = 3000;

/** What machines run on here, as the start-up line and the dashboard say it. */
export interface MachineHost {
  /** MACHINE_PROVIDER as set; `auto` chose at start-up. */
  configured: MachinesConfig['provider'];
  /** The provider machines run on. */
  provider: 'docker' | 'simulated';
  /** Why `auto` chose the simulated provider (no engine answered, and its answer); null otherwise. */
  noEngine: string | null;
  /** The machine image on the engine; null on the simulated provider. */
  image(): MachineImageState | null;
}

export interface ProviderChoice {
  provider: MachineProvider;
  host: MachineHost;
  /** Stops work under way for the provider (an image's build). */
  close(): void;
}

interface ChoiceDeps {
  clock: Clock;
  logger: FastifyBaseLogger;
  secrets: Sealer;
}

/**
 * The provider MACHINE_PROVIDER names; for `auto`, Docker where an engine
 * answers (its image built on first use, while the service answers), else the
 * simulated one. Explicit `docker` fails its start as ever when the engine or
 * the image is missing. `buildsImage`: whether this process builds a missing
 * image (ROLE=api waits for a worker's).
 */
export async function chooseProvider(config: Readonly<MachinesConfig>, deps: ChoiceDeps, options: { build?: ImageBuild | undefined; buildsImage: boolean }): Promise<ProviderChoice> {
  const simulated = (noEngine: string | null): ProviderChoice => ({
    provider: createSimulatedProvider({ bootMs: config.bootMs, clock: deps.clock, sizes: Object.keys(config.sizes) }),
    host: { configured: config.provider, provider: 'simulated', noEngine, image: () => null },
    close: () => {},
  });
  if (config.provider === 'simulated') return simulated(null);

  const where = dockerHostAddress();
  // No socket, no engine: the Docker client (some 30 MB of memory) is not even loaded.
  if (config.provider === 'auto' && where.startsWith('unix://') && !existsSync(where.slice('unix://'.length))) return simulated(`no Docker engine at ${where}`);
  // Loaded only where machines may be Docker's: dockerode and its dependencies weigh some 30 MB of memory.
  const { createDockerProvider } = await import('../providers/docker/docker.provider.ts');
  const docker = createDockerProvider(config, deps.logger, deps.secrets);
  const ready: ProviderChoice = { provider: docker, host: { configured: config.provider, provider: 'docker', noEngine: null, image: () => ({ status: 'ready' }) }, close: () => {} };
  if (config.provider === 'docker') return ready;

  const answer = await engineAnswer(() => docker.docker.ping());
  if (answer !== null) return simulated(`no Docker engine answered at ${where}: ${answer}`);
  const { DEFAULT_IMAGE_BUILD, imageIsThere, whileImageBuilds } = await import('../providers/docker/image-build.ts');
  const buildable = options.build ?? DEFAULT_IMAGE_BUILD;
  const missing: string[] = [];
  for (const image of new Set([config.image, DEFAULT_MACHINE_IMAGE])) if (!(await imageIsThere(docker, image))) missing.push(image);
  // Only the image `npm run machine-image` makes can be built here; another missing one fails the start as with `docker`.
  if (missing.length === 0 || missing.some((image) => image !== buildable.image)) return ready;
  const building = whileImageBuilds(docker, buildable, deps, options.buildsImage);
  return { provider: building.provider, host: { ...ready.host, image: building.image }, close: building.cancel };
}

/** Null when the engine answers within ENGINE_PING_MS, else why not. */
async function engineAnswer(ping: () => Promise<unknown>): Promise<string | null> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<string>((resolve) => {
    timer = setTimeout(() => resolve(`no answer within ${ENGINE_PING_MS / 1000} s`), ENGINE_PING_MS);
  });
  try {
    return await Promise.race([ping().then(() => null), late]);
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  } finally {
    clearTimeout(timer);
  }
}
