import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import pg from 'pg';

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** Wall-clock milliseconds with sub-millisecond precision, comparable across processes on one machine. */
export function epochNow(): number {
  return performance.timeOrigin + performance.now();
}

/** CPU time (user + system, all threads) of a process so far, in microseconds: this one, or another by pid. */
export function cpuMicros(pid?: number): number {
  if (pid === undefined) {
    const { user, system } = process.cpuUsage();
    return user + system;
  }
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '').split(' ');
  // utime and stime, in clock ticks of 10 ms (fields 14 and 15 of proc(5), counted from the state field here)
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

/** CPU time of every PostgreSQL server process on this machine (backends, WAL writer, autovacuum…), in microseconds. */
export function postgresCpuMicros(): number {
  let total = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === 'postgres') total += cpuMicros(Number(entry));
    } catch {
      // the process ended while we looked
    }
  }
  return total;
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface Child {
  process: ChildProcess;
  /** The first message the child sent: its readiness report. */
  ready: Record<string, unknown>;
  request<T>(message: object): Promise<T>;
  stop(): Promise<void>;
}

/** Forks a TypeScript module with Node 24 and talks to it over IPC (one request at a time). */
export async function startChild(modulePath: string, env: Record<string, string> = {}): Promise<Child> {
  const child = fork(modulePath, [], { execPath: process.execPath, env: { ...process.env, ...env }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  // A benchmark that fails must not leave its servers running.
  process.once('exit', () => child.kill('SIGKILL'));
  const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
    child.once('message', (message) => resolve(message as Record<string, unknown>));
    child.once('exit', (code) => reject(new Error(`${modulePath} exited with ${code}`)));
  });
  return {
    process: child,
    ready,
    request: <T>(message: object) =>
      new Promise<T>((resolve) => {
        child.once('message', (answer) => resolve(answer as T));
        child.send(message);
      }),
    stop: async () => {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    },
  };
}

/** A fresh Postgres schema for one benchmark run, dropped afterwards. */
export async function postgresSchema(url: string): Promise<{ schema: string; drop(): Promise<void> }> {
  const schema = `bench_${randomBytes(4).toString('hex')}`;
  const admin = async (text: string) => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query(text);
    await client.end();
  };
  await admin(`create schema ${schema}`);
  return { schema, drop: () => admin(`drop schema ${schema} cascade`) };
}

export function ratioLine(label: string, value: number, baseline: number, target?: number): string {
  const ratio = value / baseline;
  if (target === undefined) return `${label}: ${ratio.toFixed(2)} of the baseline (no target: compare trees with bench/alternate.sh)`;
  return `${label}: ${ratio.toFixed(2)} of the baseline (target ≥ ${target}) ${ratio >= target ? 'PASS' : 'BELOW TARGET'}`;
}

/** VmRSS of a /proc/<pid>/status text, in bytes. */
export function vmRssBytes(status: string): number {
  const line = status.split('\n').find((l) => l.startsWith('VmRSS:'));
  if (line === undefined) throw new Error(`no VmRSS in ${JSON.stringify(status.slice(0, 200))}`);
  return Number(line.replace(/\D+/g, '')) * 1024;
}

/** A process's resident memory, in bytes, as the kernel counts it. */
export function rssOf(pid: number): number {
  return vmRssBytes(readFileSync(`/proc/${pid}/status`, 'utf8'));
}

/**
 * `rounds` timings of each way, interleaved, the order turning each round so that no way always follows the same
 * one, after one warm-up call of each (JIT, connections, statement caches). A way checks its own answer and throws.
 */
export async function interleavedTimes<Way extends string>(ways: Record<Way, () => Promise<unknown>>, rounds: number): Promise<Record<Way, number[]>> {
  const names = Object.keys(ways) as Way[];
  for (const way of names) await ways[way]();
  const times = Object.fromEntries(names.map((way) => [way, [] as number[]])) as Record<Way, number[]>;
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < names.length; i++) {
      const way = names[(round + i) % names.length]!;
      const started = performance.now();
      await ways[way]();
      times[way].push(performance.now() - started);
    }
  }
  return times;
}
