import type { Duplex, Readable } from 'node:stream';
import type { ComputerPlan } from './computer-use.ts';
import type { NetworkPolicy } from './network-policy.ts';

/** Where Docker's own clients look for the engine (DOCKER_HOST, else the local socket): the host `local`'s address. */
export const dockerHostAddress = (): string => process.env.DOCKER_HOST || 'unix:///var/run/docker.sock';

/** The host of a provider with one, and of every machine from before hosts. */
export const LOCAL_HOST = 'local';

/** A machine's states, in the order it meets them: the one list the HTTP and MCP schemas derive from. */
export const MACHINE_STATUSES = ['starting', 'running', 'paused', 'stopping', 'stopped', 'error', 'destroyed'] as const;

export type MachineStatus = (typeof MACHINE_STATUSES)[number];

/** What a provider is told about a machine. */
export interface ProviderMachine {
  id: string;
  name: string;
  size: string;
  labels: Record<string, string>;
  status: MachineStatus;
  /** When the machine entered its current status (epoch ms). */
  statusChangedAt: number;
  /** Its display's size, for images that have one. */
  screen: { width: number; height: number };
  /** Its environment given at create, sealed (shared/sealing.ts): a provider that honours it opens it where it makes the machine. */
  sealedEnv?: string | null;
  /** The name of its image among the operator's (config `images`); absent or `default`: the base image. */
  image?: string;
  /** Its network policy; null or absent: the operator's default (MACHINE_EGRESS). */
  network?: NetworkPolicy | null;
  /** The template (its id) whose disk it starts from (issue 41); absent or null: its image's. */
  template?: string | null;
  /** The host it is placed on (MachineHosts); absent: `local`, the one host of a provider without hosts. */
  host?: string | null;
}

/** One of the provider's hosts: an engine the service places machines on. */
export interface ProviderHost {
  name: string;
  /** `unix:///path`, `tcp://host:port` or `ssh://user@host`. */
  address: string;
}

/** What a host holds, as its engine reports it. */
export interface HostCapacity {
  cpus: number;
  memoryBytes: number;
  /** Null where the engine does not say. */
  diskBytes: number | null;
}

/**
 * Several hosts: each machine lives on the one its `host` names, and
 * everything about it (its lifecycle, its agent) goes there.
 */
export interface MachineHosts {
  /**
   * Reaches the engine at `address` and reads what it holds.
   * @throws Error with one line saying why it cannot be used (not reachable, not a Docker engine).
   */
  probe(address: string): Promise<HostCapacity>;
  /**
   * Readies a host (reachable, its images there, its networks and the agent)
   * and routes its machines to it; again for a host whose address changed.
   * @throws Error saying why the host cannot take machines.
   */
  attach(host: ProviderHost): Promise<HostCapacity>;
  /** Whether the host's engine answers now. */
  ping(name: string): Promise<boolean>;
  /** The hosts attached, by name. */
  attached(): readonly string[];
  /** What an attached host's engine reported when it was readied; null for one not attached. */
  capacityOf(name: string): HostCapacity | null;
  /**
   * A move's copy: the disk of a machine stopped on its host (`machine.host`)
   * carried to the attached host `to`, as a container there of the same
   * name, settings and environment, not started. Whatever an earlier attempt
   * left on `to` is replaced, so it is safe to repeat. A machine with no
   * container on its host leaves none on `to` either (a new one is made at its
   * next start, as anywhere).
   * @throws Error saying why (an engine out of reach, the machine running, a disk a move cannot carry).
   */
  copyMachine(machine: ProviderMachine, to: string): Promise<void>;
  /** Removes the machine's container from `host`, which its record does not name (what a move leaves behind); nothing to do when there is none. @throws the engine's error. */
  removeCopy(machine: ProviderMachine, host: string): Promise<void>;
}

/**
 * Saved disks (issue 41): a machine's files kept by the host under a
 * template's id, for new machines to start from (`ProviderMachine.template`),
 * and copied straight into new machines (forks). A running machine is frozen
 * for the copy, so its files are taken at one instant, and goes on after.
 */
export interface MachineTemplates {
  /**
   * Saves the machine's disk (running, paused or stopped) under the
   * template's id; saving again under the same id replaces it.
   * @throws the host's error (the machine gone).
   */
  save(machine: ProviderMachine, templateId: string): Promise<{ sizeBytes: number }>;
  /** Removes a saved disk; nothing to do for one already gone. Machines made from it keep their files. */
  remove(templateId: string, host?: string | null): Promise<void>;
  /**
   * Copies the machine's disk, once, into each of `copies`: new machines not
   * booted yet, whose first boot starts from it. On failure nothing of the
   * copies is left on the host.
   * @throws the host's error.
   */
  fork(machine: ProviderMachine, copies: readonly ProviderMachine[]): Promise<void>;
  /**
   * Copies a saved disk from the host `from` to the host `to` (a draining
   * host's templates); nothing to do when `to` has it already.
   * @throws the host's error.
   */
  copy(templateId: string, from: string | null | undefined, to: string): Promise<void>;
}

/** One entry of a machine's directory. */
export interface FileEntry {
  name: string;
  type: 'file' | 'directory' | 'symlink';
  size: number;
  /** Epoch ms. */
  modifiedAt: number;
}

/** What is at a path: a file and its bytes (as they come), a directory, something else (a device), or nothing (null). */
export type FileRead = { type: 'file'; size: number; content: Readable } | { type: 'directory' } | { type: 'other' } | null;

/** A running machine's files. Paths are absolute; everything happens inside the machine. */
export interface MachineFiles {
  read(machine: ProviderMachine, path: string): Promise<FileRead>;
  /** A directory's entries; null when the path is not a directory. */
  list(machine: ProviderMachine, path: string): Promise<FileEntry[] | null>;
  /** Writes (or appends to) a file, creating its parent directories; null when done, else why not. */
  write(machine: ProviderMachine, path: string, content: Buffer, append: boolean): Promise<string | null>;
  remove(machine: ProviderMachine, path: string, recursive: boolean): Promise<'removed' | 'missing' | 'directory'>;
}

/**
 * Why a process ended: it exited (by itself or by a signal), the machine
 * stopped under it, or its supervisor in the machine died (what it did after
 * that is unknown). Null while it runs.
 */
export type ProcessEndReason = 'exited' | 'machine-stopped' | 'lost';

/** A background process in a machine, as the machine records it. */
export interface ProcessInfo {
  id: string;
  command: string;
  pid: number;
  status: 'running' | 'exited';
  /** Null while it runs, or when it did not exit by itself (the machine stopped under it). */
  exitCode: number | null;
  endReason: ProcessEndReason | null;
  /** Epoch ms. */
  startedAt: number;
}

/** Output of a process from a point on (`offset` counts stdout and stderr bytes together, in the order they came). */
export interface ProcessOutput {
  stdout: string;
  stderr: string;
  /** Where the next read starts. */
  offset: number;
  /** Bytes before this read's output that the machine no longer keeps (it keeps the last 64 MiB of each process's output); 0 when none were skipped. */
  dropped: number;
  running: boolean;
  exitCode: number | null;
  endReason: ProcessEndReason | null;
}

export type ProcessSignal = 'TERM' | 'KILL' | 'INT' | 'HUP';

/**
 * A running machine's background processes, recorded in the
 * machine: they outlive the service's restarts, not the machine's stop.
 */
export interface MachineProcesses {
  start(machine: ProviderMachine, process: { id: string; command: string; cwd: string | null; env: Record<string, string>; startedAt: number }): Promise<ProcessInfo>;
  list(machine: ProviderMachine): Promise<ProcessInfo[]>;
  /** Waits up to `waitMs` for output past `offset` (or the end); null for an unknown process. */
  output(machine: ProviderMachine, id: string, offset: number, waitMs: number): Promise<ProcessOutput | null>;
  /** False when the process is unknown or no longer running. */
  input(machine: ProviderMachine, id: string, data: Buffer): Promise<boolean>;
  signal(machine: ProviderMachine, id: string, signal: ProcessSignal): Promise<boolean>;
}

/**
 * A machine's use of its resources at one moment, as its agent
 * samples it every 5 s. `cpuPercent`: of the machine's CPUs (its size's), 100
 * when all are busy. Memory as `docker stats` counts it (less the page cache
 * it could drop). `rxBytes`/`txBytes`: since the machine started.
 */
export interface MetricSample {
  /** Epoch ms. */
  at: number;
  cpuPercent: number;
  memoryBytes: number;
  memoryLimitBytes: number;
  diskBytes: number;
  diskLimitBytes: number;
  pids: number;
  rxBytes: number;
  txBytes: number;
}

/** A change the host reports; the service turns it into a state change and its event. */
export type Observation =
  | { status: 'running' }
  | { status: 'paused' }
  | { status: 'error'; reason: 'boot-failure' | 'crash'; message: string }
  | { status: 'stopped'; reason: 'platform' };

/** A run as a provider executes it: under its id, so that being asked again attaches to it instead of running it twice. */
export interface ProviderRun {
  id: string;
  command: string;
  /** Absolute; the machine's home directory when null. */
  cwd: string | null;
  /** Added to the machine's environment. */
  env: Record<string, string>;
  /** Killed past this, and then failed with `timedOut`. */
  timeoutMs: number;
  /** When it was taken up to run (epoch ms, on the service's clock). */
  startedAt: number;
}

/** How a command ended, as the machine tells it (each text at most RUN_OUTPUT_LIMIT, then `truncated`). */
export interface CommandResult {
  /** Null when the command did not exit by itself (killed for its timeout). */
  exitCode: number | null;
  timedOut: boolean;
  stdout: string;
  stderr: string;
  /** Both, in the order they came. */
  output: string;
  truncated: boolean;
}

/** A picture of a machine's display, as the provider takes it (a PNG on real machines). */
export interface Screenshot {
  contentType: string;
  body: Buffer;
  width: number;
  height: number;
}

/** What an action on the display answers: the screen after it, or where the pointer is. */
export type ComputerAnswer = { screenshot: Screenshot } | { cursor: { x: number; y: number } };

/** A live picture of a display (RFB, the VNC protocol, view-only): its bytes as they come, and the viewer's to it. */
export interface ScreenStream {
  output: Readable;
  write(chunk: Buffer): void;
  close(): void;
}

/** A PTY in a running machine: its output, its input, its size. Closing it hangs up on its process group. */
export interface MachineTerminal extends ScreenStream {
  resize(cols: number, rows: number): Promise<void>;
}

/** The display refused an action it cannot do (a key it has no name for): the caller's mistake, said in its message. */
export class ActionRefused extends Error {
  override name = 'ActionRefused';
}

/** Nothing listens on the machine's port: what a port's connection is destroyed with, before it gave any byte. */
export class PortClosed extends Error {
  override name = 'PortClosed';
  constructor(port: number) {
    super(`nothing listens on port ${port} in the machine`);
  }
}

/**
 * What the service needs from a hypervisor. Every method may be called more
 * than once for the same change (a process may die between asking and
 * recording, and another finishes the job), so each must be idempotent. State
 * lives in the service's database, which is written before the host is asked
 * (the machine is `starting` before `boot`, `stopping` before `stop` and
 * `destroy`): the provider is told the machine's status and when it began,
 * and answers when it wants to be asked again (`checkAt`). A method that
 * throws leaves the machine in `error` (`machine.error`), or, for `observe`,
 * is asked again later. `boot` may be called inside a database transaction
 * (a run booting its machine, pool refills): it must start the work and
 * return, never wait for the machine.
 */
export interface MachineProvider {
  readonly name: string;
  readonly sizes: readonly string[];
  readonly defaultSize: string;
  /**
   * Readies the host once, before the service serves (an engine reachable, its
   * image there).
   * @throws ConfigError naming the variable to fix.
   */
  start?(): Promise<void>;
  /** What an operator must know about how machines run here, once started (a limit the host cannot enforce): the start-up line and /readyz say it. */
  warnings?(): readonly string[];
  /**
   * Tells, through `notice`, of machines whose host changed on its own (a
   * machine that ended), so they are observed now rather than at their next
   * check; answers the function that stops telling.
   */
  watch?(notice: (machineId: string) => void): () => void;
  /** Begins booting a created or stopped machine; `observe` is asked at `checkAt`. */
  boot(machine: ProviderMachine, now: number): Promise<{ checkAt: number }>;
  /**
   * What the host says now; `checkAt` null means nothing more to ask until the
   * next boot. May be asked about a `starting` machine whose `boot` never
   * reached the host (the process died in between): answer an error, or boot it.
   */
  observe(machine: ProviderMachine, now: number): Promise<{ observation: Observation | null; checkAt: number | null }>;
  stop(machine: ProviderMachine): Promise<void>;
  destroy(machine: ProviderMachine): Promise<void>;
  /**
   * Freezes a running machine with its memory and processes, or
   * lets a frozen one go on; nothing to do when it already is so. Stop and
   * destroy must work on a paused machine. Where absent, machines cannot pause.
   */
  pause?(machine: ProviderMachine): Promise<void>;
  /**
   * Applies the machine's network policy (`machine.network`, changed) where it
   * runs, within a second and without a restart; nothing to do for a machine
   * not running (its start applies it). Where absent, the provider's machines
   * have no network to govern (the simulated one): the policy is only kept.
   */
  setNetwork?(machine: ProviderMachine): Promise<void>;
  resume?(machine: ProviderMachine): Promise<void>;
  /**
   * Executes a run in the machine under its id and answers its outcome; asked
   * again about a run the machine already has (the process that started it
   * died, or let it go), waits for the outcome the machine records instead:
   * a command never runs twice. `signal` stops the waiting (rejecting with
   * its reason), never the command. Null: the machine cannot say what became
   * of the run (it stopped or was destroyed before recording it).
   */
  runCommand(machine: ProviderMachine, run: ProviderRun, signal: AbortSignal): Promise<CommandResult | null>;
  /** A picture of the machine's display; null for one without a display. */
  screen(machine: ProviderMachine): Promise<Screenshot | null>;
  /**
   * Performs an action on the display and answers the screen after it (or
   * the pointer's place); null for a machine without a display. Where absent,
   * the provider's machines have no display to act on.
   * @throws ActionRefused for an action the display cannot do.
   */
  computer?(machine: ProviderMachine, plan: ComputerPlan): Promise<ComputerAnswer | null>;
  /**
   * A view-only RFB (VNC) session of the display, for one viewer of a live
   * view; null for a machine without one. Where absent, live views show
   * pictures (`screen`) refreshed every few seconds.
   */
  streamScreen?(machine: ProviderMachine): Promise<ScreenStream | null>;
  /**
   * An RFB (VNC) session of the display that takes the viewer's mouse and
   * keyboard, for the owner's page only (never a live-view link's); null for a
   * machine without one.
   */
  controlScreen?(machine: ProviderMachine): Promise<ScreenStream | null>;
  /** A PTY running the machine's login shell, at this size; where absent, the provider's machines have no terminal. */
  openTerminal?(machine: ProviderMachine, size: { cols: number; rows: number }): Promise<MachineTerminal>;
  /** The picture of the screen the machine kept of a run as it ended (running or stopped); null when there is none. */
  runScreenshot?(machine: ProviderMachine, runId: string): Promise<Buffer | null>;
  /** A line the `run_command` tool's description adds (how this provider runs commands). */
  readonly commandsNote?: string;
  /**
   * A byte stream to `127.0.0.1:<port>` inside a running machine (what a
   * preview serves), writable before the machine answers: what is written
   * first goes with the connection's opening, no round trip later. When
   * nothing listens there, the stream is destroyed with PortClosed before it
   * gives a byte. Where absent, the provider's machines serve no previews.
   */
  connectPort?(machine: ProviderMachine, port: number): Promise<Duplex>;
  /** A running machine's files, where the provider offers them. */
  readonly files?: MachineFiles;
  /** Templates and forks, where the provider offers them. */
  readonly templates?: MachineTemplates;
  /** Hosts, where the provider places machines on several (the Docker provider). */
  readonly hosts?: MachineHosts;
  /** A running machine's background processes, where the provider offers them. */
  readonly processes?: MachineProcesses;
  /**
   * The samples a running machine kept of its use of resources (the last
   * hour's), taken after `sinceMs`, oldest first; empty when it kept none
   * (its agent not answering yet). Where absent, machines have no usage to show.
   */
  metrics?(machine: ProviderMachine, sinceMs: number): Promise<MetricSample[]>;
}
