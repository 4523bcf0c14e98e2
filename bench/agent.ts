// bench/machines.ts's agent part (BENCH_ONLY=agent for it alone), on one machine: a 4 KiB file read through the
// API, by MCP file_read and by the agent alone, against an engine exec of `cat` (bench/engine-exec.ts); a
// process's output reaching a reader that waits for it, through the API, the agent alone and an engine exec's own
// stream, with what could have held it up beside (the machine's CPU quota, the service's event loop and
// collector); and the agent's memory in the idle machine, just started and after all that.
import { PassThrough } from 'node:stream';
import { AGENT_PATH, containerName, RECORDS_DIR } from '../src/providers/docker/container-spec.ts';
import { newId } from '../src/shared/ids.ts';
import { engineExec } from './engine-exec.ts';
import { mib, ms, verdict, waysReport, type MachinesBench } from './machines-bench.ts';
import { epochNow, interleavedTimes, percentile, sleep, vmRssBytes } from './support.ts';

const READS = Number(process.env.BENCH_RUNS ?? 40);
const FILE = '/root/bench-4k.txt';
const FILE_BYTES = 4096;
const TARGET_READ_RATIO = 0.5;
/** Lines per reader, in OUTPUT_ROUNDS rounds of a new process each, after its first WARM_UP: at one every 50 ms, 15 s each. */
const SAMPLES = Number(process.env.BENCH_OUTPUT_SAMPLES ?? 300);
const OUTPUT_ROUNDS = 3;
const WARM_UP = 5;
const OUTPUT_WAIT_MS = 5000;
const TARGET_OUTPUT_P99_MS = 50;
/** The time (epoch ns, the host's clock: a machine shares it) every 50 ms, until its output has nowhere to go. */
const TICKER = 'while date +%s%N; do sleep 0.05; done';
const TARGET_AGENT_RSS = 15 * 1024 * 1024;

/** What machines.child.ts saw stall the service since it was last asked. */
interface Stalls {
  loopDelayMaxMs: number;
  loopDelayP99Ms: number;
  gcPausesOver20Ms: number;
  gcPauseMaxMs: number;
}

/** Printed timestamps as they reach a reader: each line's latency, its receipt minus the time it was printed. */
function latencyCollector() {
  let pending = '';
  let lines = 0;
  const latencies: number[] = [];
  return {
    latencies,
    receive(text: string, at: number) {
      pending += text;
      const complete = pending.split('\n');
      pending = complete.pop()!;
      for (const line of complete) {
        if (!/^\d{19}$/.test(line)) throw new Error(`not a timestamp in ns: ${JSON.stringify(line)} (does the image's date know %N?)`);
        // The first lines may have waited for the reader to start asking, not for the path.
        if (++lines > WARM_UP) latencies.push(at - Number(BigInt(line) / 1000n) / 1000);
      }
    },
  };
}

/** Measures and prints; answers the rows of bench/machines.ts's summary table. */
export async function agentFigures(bench: MachinesBench): Promise<string[]> {
  const summary: string[] = [];
  const id = await bench.createMachine('agent');
  await bench.seenRunning([id]);
  const container = bench.docker.getContainer(containerName(id));
  const shell = async (script: string) => {
    const { stdout, stderr, exitCode } = await engineExec(container, ['/bin/sh', '-c', script]);
    if (exitCode !== 0) throw new Error(`${script}: exit ${exitCode}: ${stderr.toString().trim()}`);
    return stdout.toString();
  };
  console.log(`  the agent, on machine ${id}:`);

  /**
   * The agent's own process (GET /v1/health names it), its connections' `agent attach` processes (the service's and
   * the bench's), and the machine's whole memory as its cgroup counts it (v2, or v1 with the page cache).
   */
  async function agentMemory() {
    const { pid } = await (await bench.agents.of(id)).health();
    const serve = vmRssBytes(await shell(`cat /proc/${pid}/status`));
    const attaches = (await shell(`for p in /proc/[0-9]*; do case "$(tr '\\0' ' ' < $p/cmdline 2>/dev/null)" in '${AGENT_PATH} attach '*) grep VmRSS $p/status;; esac; done`))
      .split('\n')
      .filter((line) => line.startsWith('VmRSS'))
      .map(vmRssBytes);
    const machine = Number(await shell('cat /sys/fs/cgroup/memory.current 2>/dev/null || cat /sys/fs/cgroup/memory/memory.usage_in_bytes 2>/dev/null || echo NaN'));
    return { serve, attaches, machine };
  }
  const machineMemory = (bytes: number) => (Number.isNaN(bytes) ? 'unknown' : mib(bytes));
  const memoryLine = (when: string, memory: Awaited<ReturnType<typeof agentMemory>>) =>
    `    the agent ${when}: VmRSS ${mib(memory.serve)} (target ≤ ${mib(TARGET_AGENT_RSS)}) ${verdict(memory.serve <= TARGET_AGENT_RSS)}; ` +
    `its ${memory.attaches.length} connections' \`agent attach\` ${memory.attaches.map(mib).join(', ')}; the whole machine (its cgroup) ${machineMemory(memory.machine)}`;
  const fresh = await agentMemory();
  console.log(memoryLine('just started, idle', fresh));

  // ── a 4 KiB file ───────────────────────────────────────────────────────────────────────────────────
  await shell(`head -c ${(FILE_BYTES / 4) * 3} /dev/urandom | base64 -w0 > ${FILE}`);
  const expected = (await engineExec(container, ['cat', FILE])).stdout;
  if (expected.length !== FILE_BYTES) throw new Error(`${FILE} has ${expected.length} bytes, not ${FILE_BYTES}`);
  const same = (way: string, bytes: Buffer) => {
    if (!bytes.equals(expected)) throw new Error(`${way}: ${bytes.length} bytes, not the file's`);
  };
  type Read = 'GET /files' | 'mcp file_read' | 'agent alone' | 'engine exec cat';
  const reads: Record<Read, () => Promise<void>> = {
    async 'GET /files'() {
      const response = await fetch(`${bench.base}/api/machines/${id}/files?${new URLSearchParams({ path: FILE })}`, { headers: bench.auth });
      if (response.status !== 200) throw new Error(`GET /files: ${response.status} ${await response.text()}`);
      same('GET /files', Buffer.from(await response.arrayBuffer()));
    },
    async 'mcp file_read'() {
      same('mcp file_read', Buffer.from((await bench.mcpTool<{ content: string }>(id, 'file_read', { path: FILE })).content));
    },
    async 'agent alone'() {
      const found = await (await bench.agents.of(id)).read(FILE);
      if (found?.type !== 'file') throw new Error(`agent alone: ${FILE} is ${found?.type ?? 'missing'}`);
      const chunks: Buffer[] = [];
      for await (const chunk of found.content) chunks.push(chunk as Buffer);
      same('agent alone', Buffer.concat(chunks));
    },
    // What a user does without us.
    async 'engine exec cat'() {
      same('engine exec cat', (await engineExec(container, ['cat', FILE])).stdout);
    },
  };
  console.log(`  a ${FILE_BYTES / 1024} KiB file read (${READS} each, interleaved):`);
  summary.push(...waysReport('4 KiB file read', await interleavedTimes(reads, READS), 'engine exec cat', { 'GET /files': TARGET_READ_RATIO }));

  // ── a process's output reaching a waiting reader ───────────────────────────────────────────────────
  type Reader = 'GET /output?waitMs' | 'agent alone' | 'engine exec stream';
  const readers: Record<Reader, (count: number) => Promise<number[]>> = {
    async 'GET /output?waitMs'(count) {
      const started = await bench.api<{ id: string }>('POST', `/api/machines/${id}/processes`, { command: TICKER });
      if (started.status !== 201) throw new Error(`POST /processes: ${started.status} ${JSON.stringify(started.json)}`);
      const collector = latencyCollector();
      try {
        for (let offset = 0; collector.latencies.length < count; ) {
          const read = await bench.api<{ stdout: string; offset: number; running: boolean }>('GET', `/api/machines/${id}/processes/${started.json.id}/output?offset=${offset}&waitMs=${OUTPUT_WAIT_MS}`);
          const at = epochNow();
          if (read.status !== 200 || !read.json.running) throw new Error(`GET /output: ${read.status} ${JSON.stringify(read.json).slice(0, 300)}`);
          collector.receive(read.json.stdout, at);
          offset = read.json.offset;
        }
      } finally {
        await bench.api('POST', `/api/machines/${id}/processes/${started.json.id}/signal`, { signal: 'KILL' });
      }
      return collector.latencies;
    },
    async 'agent alone'(count) {
      const agent = await bench.agents.of(id);
      const process = await agent.startProcess({ id: newId('proc'), command: TICKER, cwd: null, env: {}, startedAt: Date.now() });
      const collector = latencyCollector();
      try {
        for (let offset = 0; collector.latencies.length < count; ) {
          const read = await agent.processOutput(process.id, offset, OUTPUT_WAIT_MS);
          const at = epochNow();
          if (read === null || !read.running) throw new Error(`agent alone: the process ended: ${JSON.stringify(read)}`);
          collector.receive(read.stdout, at);
          offset = read.offset;
        }
      } finally {
        await agent.processSignal(process.id, 'KILL');
      }
      return collector.latencies;
    },
    // What a user does without us: an engine exec of the same loop, its stdout read as the engine streams it.
    async 'engine exec stream'(count) {
      // Its pid first, to end it after: the engine may keep an exec running when its stream is closed.
      const exec = await container.exec({ Cmd: ['/bin/sh', '-c', `echo $$; ${TICKER}`], AttachStdout: true, AttachStderr: true, Tty: false, User: 'root' });
      const stream = await exec.start({ hijack: true, stdin: false, Detach: false, Tty: false });
      const [stdout, stderr] = [new PassThrough(), new PassThrough()];
      bench.docker.modem.demuxStream(stream, stdout, stderr);
      stderr.resume();
      const collector = latencyCollector();
      let head = '';
      let pid: string | undefined;
      try {
        await new Promise<void>((resolve, reject) => {
          stdout.on('data', (chunk: Buffer) => {
            const at = epochNow();
            let text = chunk.toString();
            if (pid === undefined) {
              head += text;
              if (!head.includes('\n')) return;
              [pid, text] = [head.slice(0, head.indexOf('\n')), head.slice(head.indexOf('\n') + 1)];
            }
            try {
              collector.receive(text, at);
            } catch (error) {
              reject(error);
            }
            if (collector.latencies.length >= count) resolve();
          });
          stream.once('end', () => reject(new Error('engine exec stream: the loop ended')));
          stream.once('error', reject);
        });
      } finally {
        stream.destroy();
        if (pid !== undefined) await shell(`kill ${Number(pid)} 2>/dev/null; true`);
      }
      return collector.latencies.slice(0, count);
    },
  };
  const drift = epochNow() - Date.now();
  if (Math.abs(drift) > 2) console.log(`    (this process's clock is ${drift.toFixed(1)} ms off the system's: the latencies below are off as much)`);
  console.log(`  a process's output reaching a reader that waits for it (\`${TICKER}\`; receipt minus the time printed, ${SAMPLES} lines each, in ${OUTPUT_ROUNDS} rounds, the readers in turn):`);
  // The machine's CPU quota (its size's CPUs) stops all of its processes, the agent's too, once spent in a period.
  const throttling = async () => {
    const stat = Object.fromEntries((await shell('cat /sys/fs/cgroup/cpu.stat 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.stat')).trim().split('\n').map((line) => line.split(' ')));
    return { periods: Number(stat.nr_periods), throttled: Number(stat.nr_throttled), ms: stat.throttled_usec !== undefined ? Number(stat.throttled_usec) / 1000 : Number(stat.throttled_time) / 1e6 };
  };
  const names = Object.keys(readers) as Reader[];
  const latencies = Object.fromEntries(names.map((reader) => [reader, [] as number[]])) as Record<Reader, number[]>;
  const throttled = Object.fromEntries(names.map((reader) => [reader, { periods: 0, throttled: 0, ms: 0 }])) as Record<Reader, Awaited<ReturnType<typeof throttling>>>;
  const stalls: Stalls = { loopDelayMaxMs: 0, loopDelayP99Ms: 0, gcPausesOver20Ms: 0, gcPauseMaxMs: 0 };
  for (let round = 0; round < OUTPUT_ROUNDS; round++) {
    for (let i = 0; i < names.length; i++) {
      const reader = names[(round + i) % names.length]!;
      await bench.service.request<Stalls>({ cmd: 'stalls' });
      const before = await throttling();
      latencies[reader].push(...(await readers[reader](Math.ceil(SAMPLES / OUTPUT_ROUNDS))));
      const after = await throttling();
      throttled[reader] = { periods: throttled[reader].periods + after.periods - before.periods, throttled: throttled[reader].throttled + after.throttled - before.throttled, ms: throttled[reader].ms + after.ms - before.ms };
      if (reader !== 'GET /output?waitMs') continue;
      const window = await bench.service.request<Stalls>({ cmd: 'stalls' });
      stalls.loopDelayMaxMs = Math.max(stalls.loopDelayMaxMs, window.loopDelayMaxMs);
      stalls.loopDelayP99Ms = Math.max(stalls.loopDelayP99Ms, window.loopDelayP99Ms);
      stalls.gcPausesOver20Ms += window.gcPausesOver20Ms;
      stalls.gcPauseMaxMs = Math.max(stalls.gcPauseMaxMs, window.gcPauseMaxMs);
    }
  }
  const baseline = latencies['engine exec stream'];
  for (const reader of names) {
    const [p50, p99] = [percentile(latencies[reader], 50), percentile(latencies[reader], 99)];
    const target = reader === 'GET /output?waitMs' ? ` (target p99 ≤ ${TARGET_OUTPUT_P99_MS} ms) ${verdict(p99 <= TARGET_OUTPUT_P99_MS)}` : '';
    const over = reader === 'engine exec stream' ? '(the baseline)' : `the baseline's p50 ${ms(percentile(baseline, 50))}, p99 ${ms(percentile(baseline, 99))}`;
    const late = latencies[reader].filter((latency) => latency > TARGET_OUTPUT_P99_MS).length;
    console.log(`    ${reader.padEnd(18)} p50 ${ms(p50).padStart(8)}, p99 ${ms(p99).padStart(8)}, max ${ms(Math.max(...latencies[reader])).padStart(8)}, ${late} over ${TARGET_OUTPUT_P99_MS} ms; ${over}${target}`);
    const quota = throttled[reader];
    console.log(`      meanwhile the machine's CPU quota ran out in ${quota.throttled} of ${quota.periods} periods, its processes stopped ${ms(quota.ms)} in all`);
    if (reader === 'GET /output?waitMs') {
      console.log(`      and the service's event loop was late by p99 ${ms(stalls.loopDelayP99Ms)} (the worst round), at most ${ms(stalls.loopDelayMaxMs)}; ${stalls.gcPausesOver20Ms} collector pauses over 20 ms, the longest ${ms(stalls.gcPauseMaxMs)}`);
    }
    summary.push(`| output to a waiting reader: ${reader} | p50 ${ms(p50)}, p99 ${ms(p99)} | ${reader === 'engine exec stream' ? 'baseline' : target === '' ? '' : `p99 ≤ ${TARGET_OUTPUT_P99_MS} ms ${verdict(p99 <= TARGET_OUTPUT_P99_MS)}`} |`);
  }

  // ── the agent's memory, idle after all that ────────────────────────────────────────────────────────
  await sleep(1000);
  const used = await agentMemory();
  console.log(memoryLine(`idle after the reads above (${await shell(`ls ${RECORDS_DIR}/procs | wc -l`).then((n) => n.trim())} processes recorded)`, used));
  summary.push(`| agent VmRSS in an idle machine: just started / after the reads above | ${mib(fresh.serve)} / ${mib(used.serve)} (the whole machine ${machineMemory(used.machine)}) | ≤ ${mib(TARGET_AGENT_RSS)} ${verdict(Math.max(fresh.serve, used.serve) <= TARGET_AGENT_RSS)} |`);
  await bench.destroyAll([id]);
  return summary;
}
