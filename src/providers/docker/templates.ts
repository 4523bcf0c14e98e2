import { randomBytes } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type Docker from 'dockerode';
import type { FastifyBaseLogger } from 'fastify';
import type { MachineTemplates, ProviderMachine } from '../provider.ts';
import { containerName, containerSpec, type ContainerSettings } from './container-spec.ts';
import { hasImage, transferImage } from './image-transfer.ts';
import { destroyMachine, engineMessage, pauseMachine, resumeMachine, statusCodeOf } from './lifecycle.ts';

/** Every template is an image of this repository, tagged with the template's id (ids are valid tags). */
export const TEMPLATE_REPOSITORY = 'machine-platform/template';
/** Images of templates carry the id too, so an operator can tell them from anything else on the engine. */
export const TEMPLATE_ID_LABEL = 'machine-platform.template-id';

export const templateImage = (templateId: string) => `${TEMPLATE_REPOSITORY}:${templateId}`;

/**
 * Commits the machine's container (its writable layer over its image) into
 * `repo:tag`: the engine's `docker commit`, copy-on-write where the storage
 * driver is. A running machine is frozen with the engine's pause for the copy
 * (with the retries a pause needs: lifecycle.ts) and thawed after, so its
 * files are taken at one instant; `freezing` tells the machine's check that
 * this pause is ours and not an operator's (no `machine.paused`). A paused or
 * stopped machine is copied as it is. A machine the freezer cannot catch
 * (processes forking faster than it freezes them, as a desktop does while it
 * comes up) is copied running, and the log says so: a file being written at
 * that moment may be copied half-written. Answers the image's id.
 * @throws the engine's error (the container gone).
 */
export async function commitMachine(docker: Docker, machineId: string, repo: string, tag: string, labels: Record<string, string>, freezing: Set<string>, logger: FastifyBaseLogger): Promise<string> {
  const container = docker.getContainer(containerName(machineId));
  const { State } = await container.inspect();
  let freeze = State.Running && !State.Paused;
  if (freeze) {
    freezing.add(machineId);
    freeze = await freezeForCopy(docker, machineId, logger).catch((error: unknown) => {
      freezing.delete(machineId);
      throw error;
    });
    if (!freeze) freezing.delete(machineId);
  }
  try {
    // The query names the image; the body is configuration merged over the container's (the labels given are added; the
    // machine id label stays, and every container made from the image has its own over it).
    const query = { container: container.id, repo, tag, pause: false, comment: `saved from ${machineId}` };
    const committed = (await container.commit({ _query: query, _body: { Labels: labels } })) as { Id: string };
    return committed.Id;
  } finally {
    if (freeze) {
      try {
        await resumeMachine(docker, machineId);
      } finally {
        freezing.delete(machineId);
      }
    }
  }
}

/** Rounds of the pause's own attempts (lifecycle.ts) before a copy goes ahead without the freeze. */
const FREEZE_ROUNDS = 3;
const FREEZE_ROUND_PAUSE_MS = 500;

/** Freezes a running machine for a copy; false when the freezer kept missing its processes. @throws the engine's other errors. */
async function freezeForCopy(docker: Docker, machineId: string, logger: FastifyBaseLogger): Promise<boolean> {
  for (let round = 1; ; round++) {
    try {
      await pauseMachine(docker, machineId);
      return true;
    } catch (error) {
      if (!/unable to freeze/i.test(engineMessage(error))) throw error;
      if (round >= FREEZE_ROUNDS) {
        logger.warn({ err: error, machineId }, 'the machine could not be frozen for a copy of its disk; it is copied running');
        return false;
      }
      await delay(FREEZE_ROUND_PAUSE_MS);
    }
  }
}

/**
 * Images kept only for the containers made from them: a fork's (its copies'
 * disks are layers over it) and a deleted template's still used by its
 * machines. The engine cannot drop an image its containers stand on (a forced
 * removal does, and then no container of it can be saved again), so these
 * are removed once nothing uses them (collectKeptImages).
 */
export const KEPT_REPOSITORY = 'machine-platform/kept';
/** A kept image younger than this is left alone: a fork makes its containers from it right after the commit. */
const KEPT_GRACE_MS = 10 * 60_000;

const isEngineStatus = (error: unknown, ...statuses: number[]) => statuses.includes(statusCodeOf(error) ?? 0);

/**
 * Removes one reference to an image, never forced: the engine answers 409
 * while a container or another image stands on it. True when gone.
 * @throws the engine's error other than 404 and 409.
 */
export async function removeReference(docker: Docker, reference: string): Promise<boolean> {
  try {
    await docker.getImage(reference).remove();
    return true;
  } catch (error) {
    if (isEngineStatus(error, 404)) return true;
    if (isEngineStatus(error, 409)) return false;
    throw error;
  }
}

/** Removes the kept images nothing stands on any more (older than the grace); safe to run at any time, from any process. */
export async function collectKeptImages(docker: Docker, now: number): Promise<void> {
  // Again while something went: a kept image may have stood only on one just removed (a fork of a fork's copy).
  for (let removed = true; removed; ) {
    removed = false;
    const images = await docker.listImages({ filters: { reference: [KEPT_REPOSITORY] } });
    for (const image of images) {
      if (now - image.Created * 1000 < KEPT_GRACE_MS) continue;
      for (const tag of image.RepoTags ?? []) if (await removeReference(docker, tag)) removed = true;
    }
  }
}

/**
 * Templates and forks on a Docker engine (issue 41). A template is an image,
 * `machine-platform/template:<template id>`; its machines are containers of
 * that image like any other (settingsOf in docker.provider.ts picks it), so
 * they start as fast as a plain machine. A fork commits once into a kept
 * image and makes each copy's container from it. A deleted template's image
 * that machines still stand on becomes a kept image too; kept images go
 * when nothing stands on them (collectKeptImages, after every destroy).
 */
export function dockerTemplates(
  dockerOf: (host: string | null | undefined) => Docker,
  settingsOf: (machine: ProviderMachine) => ContainerSettings,
  freezing: Set<string>,
  logger: FastifyBaseLogger,
): MachineTemplates {
  return {
    async save(machine, templateId) {
      const docker = dockerOf(machine.host);
      await commitMachine(docker, machine.id, TEMPLATE_REPOSITORY, templateId, { [TEMPLATE_ID_LABEL]: templateId }, freezing, logger);
      const image = await docker.getImage(templateImage(templateId)).inspect();
      return { sizeBytes: image.Size };
    },

    async remove(templateId, host) {
      const docker = dockerOf(host);
      const reference = templateImage(templateId);
      if (await removeReference(docker, reference)) return;
      // Machines (or templates saved from them) stand on it: it is kept under another name for them, and its own goes.
      await docker.getImage(reference).tag({ repo: KEPT_REPOSITORY, tag: templateId });
      if (!(await removeReference(docker, reference))) throw new Error(`the engine kept ${reference} after it was tagged ${KEPT_REPOSITORY}:${templateId}`);
    },

    async copy(templateId, from, to) {
      const target = dockerOf(to);
      if (!(await hasImage(target, templateImage(templateId)))) await transferImage(dockerOf(from), target, templateImage(templateId));
    },

    async fork(machine, copies) {
      // The copies are placed on the source's host (its disk is there).
      const docker = dockerOf(machine.host);
      const tag = `fork-${machine.id}-${randomBytes(4).toString('hex')}`;
      const image = `${KEPT_REPOSITORY}:${tag}`;
      await commitMachine(docker, machine.id, KEPT_REPOSITORY, tag, {}, freezing, logger);
      const made: string[] = [];
      try {
        for (const copy of copies) {
          await docker.createContainer(containerSpec(copy, { ...settingsOf(copy), image }));
          made.push(copy.id);
        }
      } catch (error) {
        // Nothing of a failed fork stays: the service records none of its machines.
        await Promise.allSettled(made.map((id) => destroyMachine(docker, id)));
        await removeReference(docker, image).catch(() => false);
        throw error;
      }
    },
  };
}
