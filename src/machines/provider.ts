import type { McpServer } from '@modelcontextprotocol/server';
import type { FastifyBaseLogger } from 'fastify';
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

export interface CommandResult {
  exitCode: number;
  output: string;
}

export interface Screen {
  contentType: string;
  body: string;
}

/** What the machine's MCP tools can do, whatever the provider. */
export interface MachineToolContext {
  logger: FastifyBaseLogger;
  /** The machine as the HTTP API shows it, read afresh. */
  describe(): Promise<object>;
  /**
   * Runs a command as a manual run (events, stopAfter) and answers the run as
   * the HTTP API shows it once it has finished (or after the provider's
   * maxRunMs, as it then is). Throws an AppError (403 forbidden) for stopAfter
   * when the caller holds only the machine token: spec 5 rule 2.
   */
  runCommand(command: string, stopAfter: boolean): Promise<object>;
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
  runCommand(machine: ProviderMachine, command: string): Promise<CommandResult>;
  /** The machine's screen, for the live view (a real host fetches a screenshot). */
  screen(machine: ProviderMachine): Promise<Screen>;
  /** The tools of the machine's own MCP endpoint. */
  registerTools(server: McpServer, context: MachineToolContext): void;
}
