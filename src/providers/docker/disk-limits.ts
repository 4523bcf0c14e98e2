import type Docker from 'dockerode';
import { engineMessage, statusCodeOf } from './lifecycle.ts';

/** Whether the engine holds each machine to its size's disk (a container's StorageOpt size), and why not when it does not. */
export type DiskLimits = { enforced: true } | { enforced: false; why: string };

/** Storage drivers that always enforce a container's size (btrfs through quota groups, zfs through its quotas). */
const ENFORCING_DRIVERS = new Set(['btrfs', 'zfs']);

/**
 * Asks the engine whether it can limit a machine's disk. btrfs and zfs can.
 * Any other driver is asked by creating, never starting, a container with a
 * size: overlay2 takes it only over xfs with project quotas, and refuses it
 * on ext4, as on most laptops. A limit the engine would not hold is never set
 * and never reported.
 */
export async function probeDiskLimits(docker: Docker, image: string): Promise<DiskLimits> {
  const info = (await docker.info()) as { Driver?: string };
  const driver = info.Driver ?? 'unknown';
  if (ENFORCING_DRIVERS.has(driver)) return { enforced: true };
  let probe: Docker.Container;
  try {
    probe = await docker.createContainer({
      Image: image,
      Entrypoint: [],
      Cmd: ['true'],
      Labels: { 'machine-platform.probe': 'disk-limits' },
      HostConfig: { StorageOpt: { size: '1G' }, NetworkMode: 'none' },
    });
  } catch (error) {
    if (statusCodeOf(error) === undefined) throw error;
    return { enforced: false, why: `the engine's ${driver} storage cannot limit a container's disk (${engineMessage(error)})` };
  }
  await probe.remove({ force: true }).catch(() => {});
  return { enforced: true };
}

/** What the start-up line and /readyz say when machines' disks are not limited. */
export function diskWarning(limits: DiskLimits): string | null {
  if (limits.enforced) return null;
  return `machines' disks are NOT limited: ${limits.why}. One machine can fill the host's disk. Run the engine on btrfs or zfs, or on overlay2 over xfs mounted with pquota (docs/machines.md, "Disk limits").`;
}
