import type { MachineStatus } from './machines.tables.ts';

/** What a provider is told about a machine. */
export interface ProviderMachine {
  id: string;
  name: string;
  size: string;
  labels: Record<string, string>;
  status: MachineStatus;
  /** When the machine entered its current status (epoch ms). */
  statusChangedAt: number;
}

/** A change the host reports; the service turns it into a state change and its event. */
export type Observation =
  | { status: 'running' }
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

export interface Screen {
  contentType: string;
  body: string;
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
   * The longest a command is expected to run: how long the synchronous MCP
   * tools wait for a run's outcome. A run that takes longer is not failed for
   * it; only a run whose executing process died is.
   */
  readonly maxRunMs: number;
  /**
   * Readies the host once, before the service serves (an engine reachable, its
   * image there).
   * @throws ConfigError naming the variable to fix.
   */
  start?(): Promise<void>;
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
   * Executes a run in the machine under its id and answers its outcome; asked
   * again about a run the machine already has (the process that started it
   * died, or let it go), waits for the outcome the machine records instead:
   * a command never runs twice. `signal` stops the waiting (rejecting with
   * its reason), never the command. Null: the machine cannot say what became
   * of the run (it stopped or was destroyed before recording it).
   */
  runCommand(machine: ProviderMachine, run: ProviderRun, signal: AbortSignal): Promise<CommandResult | null>;
  /** The machine's screen, for the live view (a real host fetches a screenshot). */
  screen(machine: ProviderMachine): Promise<Screen>;
  /** A line the `run_command` tool's description adds (how this provider runs commands). */
  readonly commandsNote?: string;
}
