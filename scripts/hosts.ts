// npm run hosts -- add <name> <address> [--label key=value]… | list [--machines] | drain <name> [--move [--no-wait]] | remove <name>
// The hosts (Docker engines) machines are placed on, in the service's database (DATABASE_URL, as the service reads
// it). A refused command prints one line saying why, changes nothing and exits 2. drain --move records a move of each
// of the host's machines, which the service carries out, and prints their progress until none is under way (exits 1
// when some could not move); with --no-wait it leaves after recording them.
import { loadConfig } from '../src/config.ts';
import { connectDatabase } from '../src/db/connect.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { addHost, drainHost, HostRefused, listHostsWithUse, machinesOn, removeHost } from '../src/hosts/hosts.admin.ts';
import { engineClient, probeEngine } from '../src/providers/docker/engine.ts';
import { countTemplatesOn } from '../src/hosts/hosts.repository.ts';
import { createSignals } from '../src/db/signals.ts';
import { createQueue } from '../src/jobs/queue.ts';
import { drainAndMove, followMoves } from '../src/machines/moves.service.ts';
import { systemClock } from '../src/shared/clock.ts';

const USAGE = 'usage: npm run hosts -- add <name> <address> [--label key=value]… | list [--machines] | drain <name> [--move [--no-wait]] | remove <name>';
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
      if (args.some((option) => option !== '--machines')) throw new HostRefused(USAGE);
      const hosts = await listHostsWithUse(database.db, config.machines.sizes);
      if (hosts.length === 0) console.log('no hosts yet: the service records the host `local` (DOCKER_HOST) at its first start on Docker');
      for (const host of hosts) {
        const seen = host.lastSeenAt === null ? 'never seen' : `seen ${new Date(host.lastSeenAt).toISOString()}`;
        console.log(
          `${host.name.padEnd(16)} ${host.state.padEnd(9)} cpus ${host.usedCpus}/${host.cpus * config.machines.cpuOvercommit}  memory ${(host.usedMemoryBytes / GIB).toFixed(1)}/${(host.memoryBytes / GIB).toFixed(1)} GiB  machines ${host.machines}  ${seen}  ${host.address}`,
        );
        if (!args.includes('--machines')) continue;
        for (const machine of await machinesOn(database.db, host.name)) console.log(`  ${machine.id}  ${machine.status.padEnd(9)} ${machine.size.padEnd(8)} account ${machine.accountId}`);
      }
      break;
    }
    case 'drain': {
      const [name, ...options] = args;
      const move = options.includes('--move');
      const wait = !options.includes('--no-wait');
      if (name === undefined || options.some((option) => option !== '--move' && option !== '--no-wait') || (!wait && !move)) throw new HostRefused(USAGE);
      if (!move) {
        await drainHost(database.db, name, now);
        console.log(`${name} is draining: it keeps its machines and takes no new ones`);
        break;
      }
      const jobs = createQueue({ db: database.db, clock: systemClock, signals: createSignals(undefined), runner: null });
      const machineIds = await drainAndMove({ database, clock: systemClock, jobs }, name);
      console.log(`${name} is draining; ${machineIds.length} machine${machineIds.length === 1 ? '' : 's'} to move to other hosts (the service moves them: it must be running)`);
      if (!wait) break;
      const ended = await followMoves({ db: database.db }, machineIds, (line) => console.log(line));
      const templates = await countTemplatesOn(database.db, name);
      if (templates > 0) console.log(`${templates} template${templates === 1 ? ' is' : 's are'} still being copied off ${name}; remove waits for them`);
      const stuck = ended.filter((moved) => moved.step === 'failed');
      if (stuck.length === 0) {
        console.log(`${name} is empty: npm run hosts -- remove ${name} takes it out`);
      } else {
        console.log(`${stuck.length} machine${stuck.length === 1 ? '' : 's'} could not move and stay on ${name}, which stays draining; run drain --move again once there is room`);
        process.exitCode = 1;
      }
      break;
    }
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
