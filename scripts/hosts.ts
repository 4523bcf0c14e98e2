// npm run hosts -- add <name> <address> [--label key=value]… | list [--machines] | drain <name> | remove <name>
// The hosts (Docker engines) machines are placed on, in the service's database (DATABASE_URL, as the service reads
// it). A refused command prints one line saying why, changes nothing and exits 2.
import { loadConfig } from '../src/config.ts';
import { connectDatabase } from '../src/db/connect.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { addHost, drainHost, HostRefused, listHostsWithUse, removeHost } from '../src/hosts/hosts.admin.ts';
import { engineClient, probeEngine } from '../src/providers/docker/engine.ts';

const USAGE = 'usage: npm run hosts -- add <name> <address> [--label key=value]… | list [--machines] | drain <name> | remove <name>';
const GIB = 1024 ** 3;

function labelsOf(args: string[]): Record<string, string> {
  const labels: Record<string, string> = {};
  for (let i = 0; i < args.length; i++) {
    const match = args[i] === '--label' ? /^([A-Za-z0-9_.\/-]{1,63})=(.{0,200})$/.exec(args[i + 1] ?? '') : null;
    if (match === null) throw new HostRefused(`${args[i]} ${args[i + 1] ?? ''}`.trim() + ` is not --label key=value; ${USAGE}`);
    labels[match[1]!] = match[2]!;
    i++;
  }
  return labels;
}

const [command, ...args] = process.argv.slice(2);
const config = loadConfig();
const database = connectDatabase(config.databaseUrl);
try {
  await migrateToLatest(database.db);
  const now = Date.now();
  switch (command) {
    case 'add': {
      const [name, address, ...rest] = args;
      if (name === undefined || address === undefined) throw new HostRefused(USAGE);
      const certsDir = config.machines.hostCertsDir === null ? undefined : `${config.machines.hostCertsDir}/${name}`;
      const host = await addHost(database.db, (at) => probeEngine(engineClient(at, certsDir), at), { name, address, labels: labelsOf(rest) }, now);
      console.log(`added ${host.name} (${host.address}): ${host.cpus} CPUs, ${(Number(host.memory_bytes) / GIB).toFixed(1)} GiB; service processes place machines on it within seconds`);
      break;
    }
    case 'list': {
      const hosts = await listHostsWithUse(database.db, config.machines.sizes);
      if (hosts.length === 0) console.log('no hosts yet: the service records the host `local` (DOCKER_HOST) at its first start on Docker');
      for (const host of hosts) {
        const seen = host.lastSeenAt === null ? 'never seen' : `seen ${new Date(host.lastSeenAt).toISOString()}`;
        console.log(
          `${host.name.padEnd(16)} ${host.state.padEnd(9)} cpus ${host.usedCpus}/${host.cpus * config.machines.cpuOvercommit}  memory ${(host.usedMemoryBytes / GIB).toFixed(1)}/${(host.memoryBytes / GIB).toFixed(1)} GiB  machines ${host.machines}  ${seen}  ${host.address}`,
        );
      }
      break;
    }
    case 'drain':
      if (args.length !== 1) throw new HostRefused(args.includes('--move') ? 'drain --move (moving machines to other hosts) is not built yet: drain, then stop and destroy its machines' : USAGE);
      await drainHost(database.db, args[0]!, now);
      console.log(`${args[0]} is draining: it keeps its machines and takes no new ones`);
      break;
    case 'remove':
      if (args.length !== 1) throw new HostRefused(USAGE);
      await removeHost(database.db, args[0]!);
      console.log(`removed ${args[0]}`);
      break;
    default:
      throw new HostRefused(USAGE);
  }
} catch (error) {
  if (!(error instanceof HostRefused)) throw error;
  console.error(error.message);
  process.exitCode = 2;
} finally {
  await database.destroy();
}
