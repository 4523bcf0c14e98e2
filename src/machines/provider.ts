import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
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
  | { status: 'stopped'; reason: 'platform' | 'balance-empty' };

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
  /** Runs a command as a manual run (events, stopAfter) and answers the run as the HTTP API shows it. */
  runCommand(command: string, stopAfter: boolean): Promise<object>;
}

/**
 * What the service needs from a hypervisor. Every method may be called more
 * than once for the same change (two processes may race; only one applies the
 * result), so each must be idempotent. State lives in the service's database:
 * the provider is told the machine's status and when it began, and answers
 * when it wants to be asked again (`checkAt`). `boot` and `destroy` may be
 * called inside a database transaction (queued runs, pool refills): they must
 * start the work and return, never wait for the machine.
 */
export interface MachineProvider {
  readonly name: string;
  readonly sizes: readonly string[];
  readonly defaultSize: string;
  /** A run still `running` after this long was interrupted (its process died): it is failed, with its event. */
  readonly maxRunMs: number;
  /** Begins booting a created or stopped machine; `observe` is asked at `checkAt`. */
  boot(machine: ProviderMachine, now: number): Promise<{ checkAt: number }>;
  /** What the host says now; `checkAt` null means nothing more to ask until the next boot. */
  observe(machine: ProviderMachine, now: number): Promise<{ observation: Observation | null; checkAt: number | null }>;
  stop(machine: ProviderMachine): Promise<void>;
  destroy(machine: ProviderMachine): Promise<void>;
  runCommand(machine: ProviderMachine, command: string): Promise<CommandResult>;
  /** The machine's screen, for the live view. */
  screen(machine: ProviderMachine): Screen;
  /** The tools of the machine's own MCP endpoint. */
  registerTools(server: McpServer, context: MachineToolContext): void;
}
