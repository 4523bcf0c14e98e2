// What bench/machines.ts lends the parts it keeps in files of their own (screens.ts, agent.ts, service-memory.ts),
// and how they print: figures in ms, each way beside the baseline it is measured over, a verdict where a target is.
import type Docker from 'dockerode';
import type { AgentConnections } from '../src/providers/docker/agent-connection.ts';
import { percentile, type Child } from './support.ts';

export interface MachinesBench {
  docker: Docker;
  service: Child;
  base: string;
  auth: Record<string, string>;
  mcpHeaders: Record<string, string>;
  /** The bench's own connections to the machines' agents, beside the service's: the agent alone. */
  agents: AgentConnections;
  api<T = Record<string, unknown>>(method: string, path: string, body?: unknown): Promise<{ status: number; json: T }>;
  /** A tool of the machine's MCP endpoint, called with the API key: its structured answer. @throws when the tool failed */
  mcpTool<T = Record<string, unknown>>(machineId: string, name: string, args: Record<string, unknown>): Promise<T>;
  /** Creates a machine (with more of POST /api/machines's fields), removed at the bench's end whatever happens. */
  createMachine(name: string, more?: Record<string, unknown>): Promise<string>;
  seenRunning(ids: string[]): Promise<unknown>;
  destroyAll(ids: string[]): Promise<void>;
}

export const ms = (value: number) => `${value.toFixed(value < 100 ? 1 : 0)} ms`;
export const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
export const verdict = (met: boolean) => (met ? 'PASS' : 'MISSED');

/**
 * Prints each way's p50 and p99 and its p50 over the baseline's (beside it), with a verdict where the way has a
 * target ratio; answers the summary table's rows.
 */
export function waysReport<Way extends string>(label: string, times: Record<Way, number[]>, baseline: NoInfer<Way>, targets: Partial<Record<NoInfer<Way>, number>> = {}): string[] {
  const ways = Object.keys(times) as Way[];
  const width = Math.max(...ways.map((way) => way.length));
  const base = percentile(times[baseline], 50);
  const rows: string[] = [];
  for (const way of ways) {
    const [p50, p99] = [percentile(times[way], 50), percentile(times[way], 99)];
    const ratio = p50 / base;
    const target = targets[way];
    const judged = target === undefined ? '' : ` (target ≤ ${target}×) ${verdict(ratio <= target)}`;
    const over = way === baseline ? '(the baseline)' : `${ratio.toFixed(2)}× ${baseline}'s ${ms(base)}`;
    console.log(`    ${way.padEnd(width)} p50 ${ms(p50).padStart(8)}, p99 ${ms(p99).padStart(8)}; ${over}${judged}`);
    const targetCell = way === baseline ? 'baseline' : target === undefined ? '' : `≤ ${target}× ${verdict(ratio <= target)}`;
    rows.push(`| ${label}: ${way} | p50 ${ms(p50)}, p99 ${ms(p99)}, ${ratio.toFixed(2)}× | ${targetCell} |`);
  }
  return rows;
}
