import type { MachineSize } from '../config.ts';
import type { HostRow } from './hosts.repository.ts';

export interface HostRoom {
  host: string;
  cpus: number;
  memoryBytes: number;
}

/**
 * What each active host has left: its capacity less the sizes of the
 * machines placed on it (a stopped machine holds nothing; it is placed again
 * when it starts).
 */
export function roomOf(hosts: readonly HostRow[], placed: readonly { host: string; size: string; count: number }[], sizes: Readonly<Record<string, MachineSize>>): HostRoom[] {
  const room = new Map(hosts.filter((host) => host.state === 'active').map((host) => [host.name, { host: host.name, cpus: host.cpus, memoryBytes: Number(host.memory_bytes) }]));
  for (const { host, size, count } of placed) {
    const left = room.get(host);
    const holds = sizes[size];
    if (left === undefined || holds === undefined) continue;
    left.cpus -= holds.cpus * count;
    left.memoryBytes -= holds.memoryBytes * count;
  }
  return [...room.values()];
}

/**
 * The host with the most room left for a machine of this size, counted as the
 * share of its capacity left once the machine is on it (the scarcer of CPUs
 * and memory), so small and large hosts fill alike; null when none has room.
 * Ties go to the name first in order: placement is the same in every process.
 */
export function chooseHost(hosts: readonly HostRow[], rooms: readonly HostRoom[], size: MachineSize): string | null {
  const capacity = new Map(hosts.map((host) => [host.name, host]));
  let best: { host: string; share: number } | null = null;
  for (const room of [...rooms].sort((a, b) => a.host.localeCompare(b.host))) {
    const host = capacity.get(room.host)!;
    const cpusLeft = room.cpus - size.cpus;
    const memoryLeft = room.memoryBytes - size.memoryBytes;
    // A little slack for CPU counts like 0.1 + 0.2 that floating point makes 0.30000000000000004.
    if (cpusLeft < -1e-9 || memoryLeft < 0) continue;
    const share = Math.min(cpusLeft / host.cpus, memoryLeft / Number(host.memory_bytes));
    if (best === null || share > best.share) best = { host: room.host, share };
  }
  return best?.host ?? null;
}
