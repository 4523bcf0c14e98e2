import type { Kysely } from 'kysely';
import { Gauge, type Registry } from 'prom-client';
import type { MachinesConfig } from '../config.ts';
import type { DB } from '../db/database.ts';
import { HOST_STATES } from './hosts.tables.ts';
import { listHostsWithUse } from './hosts.admin.ts';

/**
 * Each host's capacity, what its machines hold of it, its machines and its
 * state, read from the database at each scrape (any process answers the same):
 * what `npm run hosts -- list` shows, for Prometheus.
 */
export function registerHostMetrics(registry: Registry, db: Kysely<DB>, machines: Pick<MachinesConfig, 'sizes' | 'cpuOvercommit'>): void {
  const hosts = () => listHostsWithUse(db, machines.sizes);
  new Gauge({
    name: 'machine_host_capacity',
    help: 'What a host offers to placement: CPUs (its own times MACHINE_CPU_OVERCOMMIT) and memory in bytes',
    labelNames: ['host', 'resource'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      for (const host of await hosts()) {
        this.set({ host: host.name, resource: 'cpus' }, host.cpus * machines.cpuOvercommit);
        this.set({ host: host.name, resource: 'memory_bytes' }, host.memoryBytes);
      }
    },
  });
  new Gauge({
    name: 'machine_host_used',
    help: 'What the machines placed on a host hold of its capacity (starting, running, paused or stopping)',
    labelNames: ['host', 'resource'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      for (const host of await hosts()) {
        this.set({ host: host.name, resource: 'cpus' }, host.usedCpus);
        this.set({ host: host.name, resource: 'memory_bytes' }, host.usedMemoryBytes);
      }
    },
  });
  new Gauge({
    name: 'machine_host_machines',
    help: 'Machines on a host that are not destroyed, whatever their state',
    labelNames: ['host'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      for (const host of await hosts()) this.set({ host: host.name }, host.machines);
    },
  });
  new Gauge({
    name: 'machine_host_state',
    help: 'A host\'s state: 1 for the one it is in (active, draining, lost), 0 for the others',
    labelNames: ['host', 'state'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      for (const host of await hosts()) for (const state of HOST_STATES) this.set({ host: host.name, state }, host.state === state ? 1 : 0);
    },
  });
}
