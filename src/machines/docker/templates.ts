import { randomBytes } from 'node:crypto';
import type Docker from 'dockerode';
import type { MachineTemplates, ProviderMachine } from '../provider.ts';
import { containerName, containerSpec, type ContainerSettings } from './container-spec.ts';
import { destroyMachine, pauseMachine, resumeMachine, statusCodeOf } from './lifecycle.ts';

/** Every template is an image of this repository, tagged with the template's id (ids are valid tags). */
export const TEMPLATE_REPOSITORY = 'machine-platform/template';
/** A fork's disk lives in an image of this repository only while its machines' containers are made. */
const FORK_REPOSITORY = 'machine-platform/fork';
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
 * stopped machine is copied as it is. Answers the image's id.
 * @throws the engine's error (the container gone).
 */
async function commitMachine(docker: Docker, machineId: string, repo: string, tag: string, labels: Record<string, string>, freezing: Set<string>): Promise<string> {
  const container = docker.getContainer(containerName(machineId));
  const { State } = await container.inspect();
  const freeze = State.Running && !State.Paused;
  if (freeze) {
    freezing.add(machineId);
    await pauseMachine(docker, machineId);
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

/** Removes an image by reference; nothing to do when it is gone. `force`: containers made from it keep their layers (the engine counts them). */
async function removeImage(docker: Docker, reference: string): Promise<void> {
  try {
    await docker.getImage(reference).remove({ force: true });
  } catch (error) {
    if (statusCodeOf(error) !== 404) throw error;
  }
}

/**
 * Templates and forks on a Docker engine (issue 41). A template is an image,
 * `machine-platform/template:<template id>`; its machines are containers of
 * that image like any other (settingsOf in docker.provider.ts picks it), so
 * they start as fast as a plain machine. A fork commits once into a
 * throw-away image, makes each copy's container from it, and removes the
 * image at once: the copies' containers hold its layers from then on, and
 * nothing is left to collect after.
 */
export function dockerTemplates(
  docker: Docker,
  settingsOf: (machine: ProviderMachine) => ContainerSettings,
  freezing: Set<string>,
): MachineTemplates {
  return {
    async save(machine, templateId) {
      await commitMachine(docker, machine.id, TEMPLATE_REPOSITORY, templateId, { [TEMPLATE_ID_LABEL]: templateId }, freezing);
      const image = await docker.getImage(templateImage(templateId)).inspect();
      return { sizeBytes: image.Size };
    },

    remove: (templateId) => removeImage(docker, templateImage(templateId)),

    async fork(machine, copies) {
      const tag = `${machine.id}-${randomBytes(4).toString('hex')}`;
      const image = `${FORK_REPOSITORY}:${tag}`;
      await commitMachine(docker, machine.id, FORK_REPOSITORY, tag, {}, freezing);
      const made: string[] = [];
      try {
        for (const copy of copies) {
          await docker.createContainer(containerSpec(copy, { ...settingsOf(copy), image }));
          made.push(copy.id);
        }
      } catch (error) {
        // Nothing of a failed fork stays: the service records none of its machines.
        await Promise.allSettled(made.map((id) => destroyMachine(docker, id)));
        throw error;
      } finally {
        await removeImage(docker, image);
      }
    },
  };
}
