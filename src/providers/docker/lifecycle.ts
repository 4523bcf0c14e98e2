import { setTimeout as delay } from 'node:timers/promises';
import type Docker from 'dockerode';
import type { Observation, ProviderMachine } from '../provider.ts';
import { containerName, containerSpec, type ContainerSettings } from './container-spec.ts';

/** The engine's answer to a request, when it gave one (a refusal, a conflict); absent when it could not be reached. */
export const statusCodeOf = (error: unknown): number | undefined => (error as { statusCode?: number } | null)?.statusCode;

/** The engine's reason, without its HTTP framing. */
export function engineMessage(error: unknown): string {
  const json = (error as { json?: { message?: string } } | null)?.json;
  const message = json?.message ?? (error instanceof Error ? error.message : String(error));
  return message.replace(/^\(HTTP code \d+\) [a-z ]+ - /i, '').trim();
}

/** The container's state as the engine reports it; null when there is no container. */
export async function inspectMachine(docker: Docker, machineId: string): Promise<Docker.ContainerInspectInfo | null> {
  try {
    return await docker.getContainer(containerName(machineId)).inspect();
  } catch (error) {
    if (statusCodeOf(error) === 404) return null;
    throw error;
  }
}

/**
 * Creates the machine's container (once: it keeps its disk from then on) and
 * starts it, whatever state it was left in. Safe to repeat.
 * @throws the engine's error (a missing image, a refused start…).
 */
export async function ensureRunning(docker: Docker, machine: ProviderMachine, settings: ContainerSettings): Promise<void> {
  let info = await inspectMachine(docker, machine.id);
  if (info === null) {
    try {
      await docker.createContainer(containerSpec(machine, settings));
    } catch (error) {
      // Created meanwhile by another process asking the same.
      if (statusCodeOf(error) !== 409) throw error;
    }
    info = await inspectMachine(docker, machine.id);
  }
  if (info?.State.Running) return;
  const container = docker.getContainer(containerName(machine.id));
  await joinOnly(docker, container, info, settings.network);
  try {
    await container.start();
  } catch (error) {
    // Already started: by another process, or between the inspect and now.
    if (statusCodeOf(error) !== 304) throw error;
  }
}

/** A machine created under another MACHINE_EGRESS is moved to the network the setting now names before it starts. */
async function joinOnly(docker: Docker, container: Docker.Container, info: Docker.ContainerInspectInfo | null, network: string): Promise<void> {
  const joined = Object.keys(info?.NetworkSettings?.Networks ?? {});
  if (joined.length === 1 && joined[0] === network) return;
  for (const other of joined.filter((name) => name !== network)) await docker.getNetwork(other).disconnect({ Container: container.id, Force: true });
  if (!joined.includes(network)) await docker.getNetwork(network).connect({ Container: container.id });
}

/** Stops the container in order (TERM, then KILL after `graceSeconds`); nothing to do for one stopped or gone. */
export async function stopMachine(docker: Docker, machineId: string, graceSeconds: number): Promise<void> {
  try {
    await docker.getContainer(containerName(machineId)).stop({ t: graceSeconds });
  } catch (error) {
    const status = statusCodeOf(error);
    if (status !== 304 && status !== 404) throw error;
  }
}

/**
 * Freezes the container's processes with the engine's pause (the cgroup
 * freezer): memory and processes stay as they are. Nothing to do for one
 * already paused.
 * @throws the engine's error (a container not running, or gone).
 */
export async function pauseMachine(docker: Docker, machineId: string): Promise<void> {
  const container = docker.getContainer(containerName(machineId));
  for (let attempt = 1; ; attempt++) {
    if ((await container.inspect()).State.Paused) return;
    try {
      await container.pause();
      return;
    } catch (error) {
      // Paused meanwhile by another process asking the same.
      if (statusCodeOf(error) === 409 && (await container.inspect()).State.Paused) return;
      // The freezer can miss a process as it forks (runc: "unable to freeze"), and thaws the rest: try again shortly.
      if (!FREEZE_MISSED.test(engineMessage(error)) || attempt >= FREEZE_ATTEMPTS) throw error;
      await delay(FREEZE_RETRY_MS);
    }
  }
}

/** How runc says the cgroup freezer did not catch every process in time. */
const FREEZE_MISSED = /unable to freeze/i;
const FREEZE_ATTEMPTS = 5;
const FREEZE_RETRY_MS = 200;

/** Thaws a paused container; nothing to do for one not paused. @throws the engine's error (a container gone). */
export async function resumeMachine(docker: Docker, machineId: string): Promise<void> {
  const container = docker.getContainer(containerName(machineId));
  if (!(await container.inspect()).State.Paused) return;
  try {
    await container.unpause();
  } catch (error) {
    if (statusCodeOf(error) !== 409 || (await container.inspect()).State.Paused) throw error;
  }
}

/** Removes the container and its volumes; nothing to do for one already gone. */
export async function destroyMachine(docker: Docker, machineId: string): Promise<void> {
  try {
    await docker.getContainer(containerName(machineId)).remove({ force: true, v: true });
  } catch (error) {
    const status = statusCodeOf(error);
    if (status !== 404 && status !== 409) throw error;
    // 409: a removal already under way; it finishes on its own.
  }
}

const SIGTERM_EXIT = 128 + 15;
const SIGKILL_EXIT = 128 + 9;

/**
 * What became of a container the service did not ask to stop:
 * its init ended on TERM (exit 0, or 143 when the init is not ours), a stop
 * in order by the engine or an operator, is `machine.stopped` (`platform`);
 * any other end is a crash, out of memory where the engine says so. The exit
 * code decides first: the engine also reports OOMKilled for a machine one of
 * whose commands once ran out of memory.
 */
export function observationOfExit(state: Docker.ContainerInspectInfo['State'], memory: string): Observation {
  if (state.ExitCode === 0 || state.ExitCode === SIGTERM_EXIT) return { status: 'stopped', reason: 'platform' };
  if (state.OOMKilled && state.ExitCode === SIGKILL_EXIT) {
    return { status: 'error', reason: 'crash', message: `The machine ran out of memory (${memory}) and was killed.` };
  }
  if (state.ExitCode === SIGKILL_EXIT) return { status: 'error', reason: 'crash', message: 'The machine was killed (SIGKILL).' };
  const why = state.Error ? `: ${state.Error}` : '';
  return { status: 'error', reason: 'crash', message: `The machine's init ended with exit code ${state.ExitCode}${why}.` };
}
