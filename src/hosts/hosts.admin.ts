import type { Kysely } from 'kysely';
import { checkHostAddress, HOST_NAME, type MachineSize } from '../config.ts';
import type { DB } from '../db/database.ts';
import type { HostCapacity } from '../providers/provider.ts';
import { countMachinesOn, countTemplatesOn, deleteHost, findHost, insertHost, listHosts, placedSizes, setHostState, type HostRow } from './hosts.repository.ts';
import { newHostRow } from './hosts.service.ts';

/** An operator's mistake, said in one line; nothing was changed. */
export class HostRefused extends Error {
  override name = 'HostRefused';
}

/** A host as `npm run hosts -- list` shows it: its capacity and what its machines hold of it. */
export interface HostListing {
  name: string;
  address: string;
  state: string;
  labels: Record<string, string>;
  cpus: number;
  memoryBytes: number;
  usedCpus: number;
  usedMemoryBytes: number;
  machines: number;
  lastSeenAt: number | null;
}

/**
 * Adds a host: its name and address checked, its engine reached and read
 * (`probe`), then recorded `active` with that capacity. Service processes take
 * it into placement within seconds.
 * @throws HostRefused with one line saying why (a bad name or address, a name taken, an engine out of reach).
 */
export async function addHost(db: Kysely<DB>, probe: (address: string) => Promise<HostCapacity>, input: { name: string; address: string; labels: Record<string, string> }, now: number): Promise<HostRow> {
  if (!HOST_NAME.test(input.name)) throw new HostRefused(`"${input.name}" is not a host name: a-z, 0-9 and -, at most 40, starting with a letter or digit`);
  const problem = checkHostAddress(input.address);
  if (problem !== null) throw new HostRefused(`the address ${input.address} ${problem}`);
  if ((await findHost(db, input.name)) !== undefined) throw new HostRefused(`a host named ${input.name} exists already`);
  let capacity: HostCapacity;
  try {
    capacity = await probe(input.address);
  } catch (error) {
    throw new HostRefused(error instanceof Error ? error.message : String(error));
  }
  const row = { ...newHostRow(input.name, input.address, now, input.labels), cpus: capacity.cpus, memory_bytes: capacity.memoryBytes, disk_bytes: capacity.diskBytes, last_seen_at: now };
  await insertHost(db, row);
  return row;
}

export async function listHostsWithUse(db: Kysely<DB>, sizes: Readonly<Record<string, MachineSize>>): Promise<HostListing[]> {
  const placed = await placedSizes(db);
  const listings: HostListing[] = [];
  for (const host of await listHosts(db)) {
    const mine = placed.filter((entry) => entry.host === host.name);
    listings.push({
      name: host.name,
      address: host.address,
      state: host.state,
      labels: JSON.parse(host.labels) as Record<string, string>,
      cpus: host.cpus,
      memoryBytes: Number(host.memory_bytes),
      usedCpus: mine.reduce((sum, entry) => sum + (sizes[entry.size]?.cpus ?? 0) * entry.count, 0),
      usedMemoryBytes: mine.reduce((sum, entry) => sum + (sizes[entry.size]?.memoryBytes ?? 0) * entry.count, 0),
      machines: await countMachinesOn(db, host.name),
      lastSeenAt: host.last_seen_at === null ? null : Number(host.last_seen_at),
    });
  }
  return listings;
}

/** The machines a host holds, destroyed ones aside, for `list --machines`: what an operator needs to find their owners. */
export async function machinesOn(db: Kysely<DB>, host: string): Promise<Array<{ id: string; status: string; size: string; accountId: string }>> {
  const rows = await db.selectFrom('machines').select(['id', 'status', 'size', 'account_id']).where('host', '=', host).where('status', '!=', 'destroyed').orderBy('id').execute();
  return rows.map((row) => ({ id: row.id, status: row.status, size: row.size, accountId: row.account_id }));
}

/** A draining host keeps its machines and takes no new ones. @throws HostRefused for an unknown host. */
export async function drainHost(db: Kysely<DB>, name: string, now: number): Promise<void> {
  if ((await findHost(db, name)) === undefined) throw new HostRefused(`there is no host named ${name}`);
  await setHostState(db, name, 'draining', now);
}

/** @throws HostRefused for an unknown host, or one that still holds machines or templates (saying how many). */
export async function removeHost(db: Kysely<DB>, name: string): Promise<void> {
  if ((await findHost(db, name)) === undefined) throw new HostRefused(`there is no host named ${name}`);
  const machines = await countMachinesOn(db, name);
  if (machines > 0) throw new HostRefused(`the host ${name} still holds ${machines} machine${machines === 1 ? '' : 's'}: drain it and move or destroy them first`);
  const templates = await countTemplatesOn(db, name);
  if (templates > 0) throw new HostRefused(`the host ${name} still holds ${templates} template${templates === 1 ? '' : 's'}: drain --move carries them to another host`);
  await deleteHost(db, name);
}
