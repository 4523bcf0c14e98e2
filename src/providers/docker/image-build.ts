import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { FastifyBaseLogger } from 'fastify';
import { DEFAULT_MACHINE_IMAGE } from '../../config.ts';
import { SECOND, type Clock, type Timer } from '../../shared/clock.ts';
import type { DockerProvider } from './docker.provider.ts';
import { statusCodeOf } from './lifecycle.ts';

/** The machine image on the engine: there, being built on first use, or its build failed (`why`: the build's last words). */
export type MachineImageState = { status: 'ready' } | { status: 'building'; since: number } | { status: 'failed'; why: string };

/** How a missing machine image is built: the tag the command makes, and the command (argv, run from the repository's root). */
export interface ImageBuild {
  image: string;
  command: readonly string[];
}

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** `npm run machine-image`: MACHINE_IMAGE's default. */
export const DEFAULT_IMAGE_BUILD: ImageBuild = { image: DEFAULT_MACHINE_IMAGE, command: ['bash', 'scripts/machine-image.sh'] };

/** How often the log says the build goes on, with its latest line. */
const PROGRESS_EVERY_MS = 10 * SECOND;
/** How soon a machine waiting for the image is looked at again, should the notice that the image is ready be missed (ROLE=api). */
const WAITING_RECHECK_MS = 15 * SECOND;

/** Whether the engine has the image. @throws the engine's error, other than its 404. */
export async function imageIsThere(provider: DockerProvider, image: string): Promise<boolean> {
  try {
    await provider.docker.getImage(image).inspect();
    return true;
  } catch (error) {
    if (statusCodeOf(error) === 404) return false;
    throw error;
  }
}

export interface BuildingProvider {
  provider: DockerProvider;
  image(): MachineImageState;
  /** Stops a build under way (the service closing). */
  cancel(): void;
}

/**
 * The Docker provider on an engine that lacks the machine image
 * (MACHINE_PROVIDER=auto, on first use): its start begins the build and
 * returns, so the service answers meanwhile. Machines booted during the build
 * stay `starting` and boot once the image is there; if the build fails they
 * end in `error` saying how to build the image, and a start after that boots
 * them if someone has built it meanwhile. Everything else is the provider's.
 * A process that `builds` nothing (ROLE=api: the workers build it) looks
 * for the image until it is there.
 */
export function whileImageBuilds(inner: DockerProvider, build: ImageBuild, deps: { logger: FastifyBaseLogger; clock: Clock }, builds = true): BuildingProvider {
  const { logger, clock } = deps;
  let state: MachineImageState = { status: 'building', since: clock.now() };
  let child: ChildProcess | null = null;
  let cancelled = false;
  let notice: ((machineId: string) => void) | null = null;
  /** Machines that asked to boot during the build: told of the image at once when it is there. */
  const waiting = new Set<string>();
  /** The provider's own start, once the image is there: asked once, whoever asks. */
  let started: Promise<void> | null = null;
  const startInner = () => (started ??= inner.start!().catch((error: unknown) => {
    started = null;
    throw error;
  }));

  function ready(): void {
    state = { status: 'ready' };
    for (const machineId of waiting) notice?.(machineId);
    waiting.clear();
  }

  function runBuild(): Promise<void> {
    return new Promise((resolve, reject) => {
      const [command, ...args] = build.command;
      let lastLine = '';
      const since = clock.now();
      // Its own process group, so that a cancel reaches the docker commands the script runs, not only the script.
      const spawned = spawn(command!, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
      child = spawned;
      const takeLines = (chunk: Buffer) => {
        const lines = chunk.toString('utf8').split(/[\r\n]+/).map((line) => line.trim()).filter((line) => line !== '');
        if (lines.length > 0) lastLine = lines.at(-1)!.slice(0, 300);
      };
      spawned.stdout!.on('data', takeLines);
      spawned.stderr!.on('data', takeLines);
      let progress: Timer | null = null;
      const tell = () => {
        const seconds = Math.round((clock.now() - since) / SECOND);
        logger.info({ image: build.image, seconds, latest: lastLine }, `building the machine image ${build.image} (${seconds} s): ${lastLine || 'under way'}`);
        progress = clock.setTimeout(tell, PROGRESS_EVERY_MS);
      };
      progress = clock.setTimeout(tell, PROGRESS_EVERY_MS);
      spawned.once('error', (error) => {
        progress?.clear();
        reject(new Error(`${command} could not run: ${error.message}`));
      });
      spawned.once('close', (code, signal) => {
        progress?.clear();
        child = null;
        if (code === 0) resolve();
        else reject(new Error(lastLine || `${build.command.join(' ')} exited with ${code ?? signal}`));
      });
    });
  }

  /** Until the image is there, as another process builds it. */
  function imageArrives(): Promise<void> {
    return new Promise((resolve, reject) => {
      const look = () => {
        if (cancelled) return reject(new Error('cancelled'));
        imageIsThere(inner, build.image).then(
          (there) => (there ? resolve() : void clock.setTimeout(look, PROGRESS_EVERY_MS)),
          () => void clock.setTimeout(look, PROGRESS_EVERY_MS),
        );
      };
      look();
    });
  }

  async function buildAndStart(): Promise<void> {
    if (!builds) {
      logger.info({ image: build.image }, `the machine image ${build.image} is not on the Docker engine: a worker process builds it (ROLE=api); machines boot once it is there`);
      await imageArrives().then(startInner).then(ready, (error: unknown) => {
        if (cancelled) return;
        state = { status: 'failed', why: error instanceof Error ? error.message : String(error) };
        logger.error({ err: error }, 'the Docker provider could not start on the machine image');
      });
      return;
    }
    logger.info({ image: build.image }, `the machine image ${build.image} is not on the Docker engine: building it now (a few minutes, once); machines created meanwhile wait in starting`);
    try {
      await runBuild();
      if (!(await imageIsThere(inner, build.image))) throw new Error(`${build.command.join(' ')} finished without making ${build.image}`);
      await startInner();
    } catch (error) {
      if (cancelled) return;
      const why = error instanceof Error ? error.message : String(error);
      state = { status: 'failed', why };
      logger.error({ image: build.image, why }, `the machine image ${build.image} could not be built (${why}); build it with \`npm run machine-image\` (where no image registry is reachable it needs root and debootstrap), then start the machines again`);
      return;
    }
    logger.info({ image: build.image }, `the machine image ${build.image} is built: machines boot`);
    ready();
  }

  /** After a failed build: whether the image is there now (built by hand), and the provider started on it. */
  async function builtSince(): Promise<boolean> {
    if (!(await imageIsThere(inner, build.image))) return false;
    await startInner();
    ready();
    return true;
  }

  const provider: DockerProvider = {
    ...inner,
    async start() {
      void buildAndStart();
    },
    warnings: () => (state.status === 'ready' ? inner.warnings?.() ?? [] : []),
    watch(given) {
      notice = given;
      const unwatch = inner.watch!(given);
      return () => {
        notice = null;
        unwatch();
      };
    },
    async observe(machine, now) {
      // A machine not starting is one the engine already holds (from before the image went missing): the provider's.
      if (state.status === 'ready' || machine.status !== 'starting') return inner.observe(machine, now);
      if (state.status === 'building') {
        waiting.add(machine.id);
        return { observation: null, checkAt: now + WAITING_RECHECK_MS };
      }
      if (await builtSince()) return inner.observe(machine, now);
      return {
        observation: { status: 'error', reason: 'boot-failure', message: `The machine image could not be built (${state.why}). The operator can build it with \`npm run machine-image\`; start the machine again after.` },
        checkAt: null,
      };
    },
  };
  return {
    provider,
    image: () => state,
    cancel() {
      cancelled = true;
      if (child?.pid !== undefined && child.exitCode === null) {
        try {
          process.kill(-child.pid, 'SIGTERM');
        } catch {
          // Gone already.
        }
      }
    },
  };
}
