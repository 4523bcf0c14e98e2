import type { Kysely } from 'kysely';
import { ConfigError } from '../config.ts';
import type { Deps } from '../deps.ts';
import type { DB } from '../db/database.ts';
import { dockerHostAddress, LOCAL_HOST, type MachineProvider } from '../providers/provider.ts';
import { capacityExhausted } from './hosts.errors.ts';
import { listHosts, lockHostsForPlacement, placedSizes, returnHost, setHostSeen, upsertHost, type HostRow } from './hosts.repository.ts';
import { chooseHost, roomOf } from './placement.ts';

/**
 * At start-up, before the service serves: records the hosts MACHINE_HOSTS
 * names (or, when it names none and none was added, the one host `local` of
 * DOCKER_HOST, which the provider's own start readied), readies in the
 * provider every recorded host not readied yet, and stores the capacity each
 * engine reports. A host that cannot be readied (its engine down, or its
 * machine image still being built) is logged, recorded with the capacity its
 * engine reports if it answers, and left to the host watcher.
 * @throws ConfigError when no host's engine answers at all.
 */
export async function readyHosts(deps: Pick<Deps, 'db' | 'config' | 'clock' | 'logger'>, provider: MachineProvider): Promise<void> {
  const hosts = provider.hosts;
  if (hosts === undefined) return;
  const now = deps.clock.now();
  const named = deps.config.machines.hosts;
  const recorded = await listHosts(deps.db);
  const wanted = named.length > 0 ? named : recorded.length === 0 || recorded.some((host) => host.name === LOCAL_HOST) ? [{ name: LOCAL_HOST, address: dockerHostAddress() }] : [];
  const byName = new Map(recorded.map((host) => [host.name, host]));
  for (const host of wanted) {
    const known = byName.get(host.name);
    byName.set(host.name, known === undefined ? newHostRow(host.name, host.address, now) : { ...known, address: host.address });
  }
  let answering = 0;
  let lastError: unknown = null;
  for (const host of byName.values()) {
    try {
      const capacity = hosts.capacityOf(host.name) ?? (await hosts.attach({ name: host.name, address: host.address }));
      await upsertHost(deps.db, { ...host, cpus: capacity.cpus, memory_bytes: capacity.memoryBytes, disk_bytes: capacity.diskBytes, last_seen_at: now });
      answering++;
    } catch (error) {
      lastError = error;
      deps.logger.warn({ err: error, host: host.name }, 'a host could not be readied yet; the host watcher tries again');
      const capacity = await hosts.probe(host.address).catch(() => null);
      if (capacity !== null) answering++;
      await upsertHost(deps.db, capacity === null ? host : { ...host, cpus: capacity.cpus, memory_bytes: capacity.memoryBytes, disk_bytes: capacity.diskBytes, last_seen_at: now });
    }
  }
  if (answering === 0 && byName.size > 0) {
    if (lastError instanceof ConfigError) throw lastError;
    throw new ConfigError(`MACHINE_HOSTS: no host's engine answers (${lastError instanceof Error ? lastError.message : String(lastError)})`);
  }
}

export function newHostRow(name: string, address: string, now: number, labels: Record<string, string> = {}): HostRow {
  return { name, address, state: 'active', drained: 0, labels: JSON.stringify(labels), cpus: 0, memory_bytes: 0, disk_bytes: null, created_at: now, state_changed_at: now, last_seen_at: null };
}

/** Where a new machine should go: `only` that host (a fork's copies, whose disks are made there), or `prefer` it when it has room (a template's host, which holds its disk; elsewhere the disk is copied first). */
export interface PlacementWish {
  only?: string | null;
  prefer?: string | null;
}

/**
 * The host a new machine of `size` goes to, decided inside the transaction
 * that records it (the hosts are locked first on PostgreSQL, so two processes
 * placing at once never fill one host past its capacity): the active host
 * with the most room, or as `wish` says. A provider without hosts has the one,
 * `local`, and no capacity to count.
 * @throws AppError 409 capacity_exhausted when no host (or not `only`) has room.
 */
export async function placeMachine(deps: Pick<Deps, 'config'>, provider: MachineProvider, db: Kysely<DB>, size: string, wish: PlacementWish = {}): Promise<string> {
  if (provider.hosts === undefined) return LOCAL_HOST;
  const { sizes, cpuOvercommit } = deps.config.machines;
  await lockHostsForPlacement(db);
  const hosts = (await listHosts(db)).map((host) => ({ ...host, cpus: host.cpus * cpuOvercommit }));
  const wanted = sizes[size];
  if (wanted === undefined) throw capacityExhausted(size);
  const rooms = roomOf(hosts, await placedSizes(db), sizes);
  const among = (name: string | null | undefined) => (name === undefined || name === null ? rooms : rooms.filter((room) => room.host === name));
  const chosen = (wish.prefer ? chooseHost(hosts, among(wish.prefer), wanted) : null) ?? chooseHost(hosts, among(wish.only), wanted);
  if (chosen === null) throw capacityExhausted(size);
  return chosen;
}

/**
 * Where a machine moved off `from` goes (drain --move), decided inside the
 * transaction that records the move as placeMachine decides for a new one:
 * the active host other than `from` with the most room for its size; null
 * when none has room.
 */
export async function placeMovedMachine(deps: Pick<Deps, 'config'>, db: Kysely<DB>, size: string, from: string): Promise<string | null> {
  const { sizes, cpuOvercommit } = deps.config.machines;
  await lockHostsForPlacement(db);
  const hosts = (await listHosts(db)).filter((host) => host.name !== from).map((host) => ({ ...host, cpus: host.cpus * cpuOvercommit }));
  const wanted = sizes[size];
  return wanted === undefined ? null : chooseHost(hosts, roomOf(hosts, await placedSizes(db), sizes), wanted);
}

/**
 * One pass of a process's watch over the hosts: a host added since (`npm run
 * hosts -- add`) is readied here, every readied one pinged, and an answer
 * recorded as the host's last sighting (any process's counts). A lost host
 * that answers again returns to what the operator left it, active or
 * draining (`back`: this process made it so).
 * `silent`: the hosts no process has heard from for longer than
 * MACHINE_HOST_LOST_AFTER_MS that are not yet lost; `answering`: those that
 * answered this pass.
 */
export async function watchHostsOnce(deps: Pick<Deps, 'db' | 'config' | 'clock' | 'logger'>, provider: MachineProvider): Promise<{ silent: HostRow[]; back: string[]; answering: string[] }> {
  const hosts = provider.hosts;
  const back: string[] = [];
  const answering: string[] = [];
  if (hosts === undefined) return { silent: [], back, answering };
  const attached = new Set(hosts.attached());
  const silent: HostRow[] = [];
  for (const host of await listHosts(deps.db)) {
    let answered: boolean;
    if (attached.has(host.name)) {
      answered = await hosts.ping(host.name);
    } else {
      answered = await hosts.attach({ name: host.name, address: host.address }).then(
        async (capacity) => {
          await upsertHost(deps.db, { ...host, cpus: capacity.cpus, memory_bytes: capacity.memoryBytes, disk_bytes: capacity.diskBytes });
          return true;
        },
        (err: unknown) => {
          deps.logger.debug({ err, host: host.name }, 'a host could not be readied');
          return false;
        },
      );
    }
    const now = deps.clock.now();
    if (answered) {
      answering.push(host.name);
      await setHostSeen(deps.db, host.name, now);
      if (host.state === 'lost' && (await returnHost(deps.db, host.name, now))) {
        deps.logger.warn({ host: host.name, drained: host.drained === 1 }, host.drained === 1 ? 'a lost host answers again: it is draining again, as the operator left it' : 'a lost host answers again: it takes machines again');
        back.push(host.name);
      }
      continue;
    }
    const lastHeard = host.last_seen_at ?? host.created_at;
    if (host.state !== 'lost' && now - Number(lastHeard) > deps.config.machines.hostLostAfterMs) silent.push(host);
  }
  return { silent, back, answering };
}
