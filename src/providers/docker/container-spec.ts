import type Docker from 'dockerode';
import type { MachineSize } from '../../config.ts';
import type { ProviderMachine } from '../provider.ts';

/** The volume that holds the agent's binaries, mounted read-only into every machine at AGENT_DIR. */
export const AGENT_VOLUME = 'machine-platform-agent';
export const AGENT_DIR = '/opt/machine-platform';
/** A link to the newest binary the service installed: a machine starts whatever it names at its start. */
export const AGENT_PATH = `${AGENT_DIR}/agent`;
/** The agent's socket in a machine (its default: agent/API.md). */
export const AGENT_SOCKET = '/run/machine-platform/agent.sock';
/** Where the agent keeps its records of runs and processes in a machine (on its disk: they outlive the service, not the machine's stop). */
export const RECORDS_DIR = '/var/lib/machine-platform';
/** Every container of a machine carries its id under this label: a restarted service finds what exists. */
export const MACHINE_ID_LABEL = 'machine-platform.machine-id';

export const containerName = (machineId: string) => `machine-platform-${machineId}`;

/**
 * What a machine may do beyond an unprivileged process: own and write any of
 * its files (CHOWN, DAC_OVERRIDE, FOWNER, FSETID), switch users and signal
 * them (SETUID, SETGID, KILL: package managers drop to their own users), and
 * listen on low ports (NET_BIND_SERVICE). Left out of Docker's defaults:
 * raw sockets (NET_RAW), device nodes (MKNOD), file capabilities (SETFCAP,
 * SETPCAP), chroot (SYS_CHROOT) and the audit log (AUDIT_WRITE).
 */
export const MACHINE_CAPABILITIES = ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'SETUID', 'SETGID', 'KILL', 'NET_BIND_SERVICE'] as const;

/**
 * The machine's first process, under the engine's init. A disk copied from
 * another machine (a template's, a fork's: issue 41) starts without that
 * machine's records of runs and processes (they name the host name they were
 * written under, the machine's id). It names the
 * machines' resolver (MACHINE_NAMESERVER) as the only nameserver, or none when
 * the machine has no way out: never the engine's own resolver (127.0.0.11),
 * which would answer other containers' names and forward the rest from inside
 * the machine to the host's resolver, a private address the firewall drops.
 * Then the machine agent (agent/, from the read-only agent volume: whatever
 * binary the service installed last), in the background, started again a
 * second after it ends (killed for memory, say): a machine is never left with
 * nothing to run its commands. Then the image's own machine init when it has one (the default
 * image: a desktop), else a shell that waits. Either exits 0 on TERM: a stop
 * in order.
 */
const MACHINE_INIT = [
  '/bin/sh',
  '-c',
  `here=$(cat /etc/hostname 2>/dev/null); mine=$(cat ${RECORDS_DIR}/.machine 2>/dev/null)
if [ -n "$mine" ] && [ "$mine" != "$here" ]; then rm -rf ${RECORDS_DIR}; fi; mkdir -p ${RECORDS_DIR} && echo "$here" > ${RECORDS_DIR}/.machine
if [ -n "\${MACHINE_NAMESERVER:-}" ]; then echo "nameserver $MACHINE_NAMESERVER" > /etc/resolv.conf; else echo '# This machine has no way out, so no nameserver.' > /etc/resolv.conf; fi 2>/dev/null
(while :; do ${AGENT_PATH} serve --records ${RECORDS_DIR}; sleep 1; done) </dev/null >/dev/null 2>&1 &
if [ -x /usr/local/lib/machine-platform/init ]; then exec /usr/local/lib/machine-platform/init; fi
mkdir -p ${RECORDS_DIR}
trap 'exit 0' TERM INT
while :; do sleep 86400 & wait $!; done`,
];

/**
 * The machine's host name, from its id (`mch_x1y2` → `mch-x1y2`): the engine
 * makes the host name a name other containers on the network can look up, so
 * it must say nothing a user chose.
 */
export function hostnameOf(machineId: string): string {
  return machineId.toLowerCase().replace(/[^a-z0-9-]+/g, '-').slice(0, 63);
}

export interface ContainerSettings {
  image: string;
  size: MachineSize;
  /** The engine network the machine joins (with or without a way out). */
  network: string;
  /** The machines' resolver (resolver.ts) on that network; null when the machine has no way out. */
  nameserver: string | null;
  /** Whether the engine enforces a container's disk size (disk-limits.ts): a limit that would not hold is not set. */
  limitDisk: boolean;
  /** The environment its creator gave (issue 41); what the platform sets itself wins over it. */
  env?: Record<string, string>;
}

/**
 * The container's environment: the creator's, then the platform's over it.
 * Everything in the machine starts from it (its init, the agent, and so every
 * command, process and terminal the agent starts: agent/commands.go), so it is
 * given once, when the container is made; one name, one entry.
 */
function containerEnv(user: Record<string, string>, platform: Record<string, string>): string[] {
  return Object.entries({ ...user, ...platform }).map(([name, value]) => `${name}=${value}`);
}

/** Everything the engine is told about a machine's container, in one place, from its size. */
export function containerSpec(machine: ProviderMachine, settings: ContainerSettings): Docker.ContainerCreateOptions {
  const { size } = settings;
  return {
    name: containerName(machine.id),
    Image: settings.image,
    Cmd: MACHINE_INIT,
    Entrypoint: [],
    Hostname: hostnameOf(machine.id),
    WorkingDir: '/root',
    User: 'root',
    // The machine init's display (the default image's) takes its size from here.
    Env: containerEnv(settings.env ?? {}, {
      DISPLAY: ':1',
      MACHINE_SCREEN: `${machine.screen.width}x${machine.screen.height}`,
      // Always set, empty for none: a disk copied from a machine with a way out carries its value in the image.
      MACHINE_NAMESERVER: settings.nameserver ?? '',
    }),
    Labels: { [MACHINE_ID_LABEL]: machine.id },
    HostConfig: {
      Init: true,
      NanoCpus: Math.round(size.cpus * 1e9),
      Memory: size.memoryBytes,
      // No swap: the memory limit is the machine's memory.
      MemorySwap: size.memoryBytes,
      // /dev/shm may use the machine's memory, as on a VM (the engine's 64 MiB default breaks browsers); it is
      // counted in that memory, so it takes nothing from other machines.
      ShmSize: size.memoryBytes,
      PidsLimit: size.pids,
      Privileged: false,
      CapDrop: ['ALL'],
      CapAdd: [...MACHINE_CAPABILITIES],
      SecurityOpt: ['no-new-privileges'],
      NetworkMode: settings.network,
      Mounts: [{ Type: 'volume', Source: AGENT_VOLUME, Target: AGENT_DIR, ReadOnly: true }],
      Dns: settings.nameserver ? [settings.nameserver] : [],
      ...(settings.limitDisk ? { StorageOpt: { size: String(size.diskBytes) } } : {}),
      RestartPolicy: { Name: 'no' },
      // The init writes nothing worth keeping; a chatty image must not fill the engine's disk.
      LogConfig: { Type: 'json-file', Config: { 'max-size': '1m', 'max-file': '1' } },
    },
  };
}
