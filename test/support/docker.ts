import Docker from 'dockerode';
import { DEFAULT_MACHINE_IMAGE } from '../../src/config.ts';
import { MACHINE_ID_LABEL } from '../../src/machines/docker/container-spec.ts';

/**
 * The Docker provider's tests run against a real engine. Where none can run
 * they are skipped, saying why; `.ci/run` sets MACHINE_DOCKER_TESTS=required,
 * and then a missing engine or image fails them instead: CI never skips them
 * silently.
 */
export async function dockerUnavailable(): Promise<string | false> {
  const docker = new Docker();
  let why: string | false = false;
  try {
    await docker.ping();
    await docker.getImage(DEFAULT_MACHINE_IMAGE).inspect();
  } catch (error) {
    why = `no Docker engine with ${DEFAULT_MACHINE_IMAGE} here (${(error as Error).message.split('\n')[0]}): start dockerd and run npm run machine-image`;
  }
  if (why && process.env.MACHINE_DOCKER_TESTS === 'required') throw new Error(`MACHINE_DOCKER_TESTS=required, but ${why}`);
  return why;
}

/** Removes the containers of these machines, whatever state they are in: every test cleans up after itself. */
export async function removeMachineContainers(machineIds: readonly string[]): Promise<void> {
  const docker = new Docker();
  const wanted = new Set(machineIds);
  const containers = await docker.listContainers({ all: true, filters: { label: [MACHINE_ID_LABEL] } });
  await Promise.all(
    containers
      .filter((container) => wanted.has(container.Labels[MACHINE_ID_LABEL]!))
      .map((container) => docker.getContainer(container.Id).remove({ force: true, v: true }).catch(() => {})),
  );
}

export const engine = () => new Docker();
