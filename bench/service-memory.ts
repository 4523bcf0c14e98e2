// bench/machines.ts's memory part (BENCH_ONLY=memory for it alone): the service's RSS (the kernel's VmRSS of its
// process) idle, then after each of three floods of bytes from one machine through it — a run printing 1 GB, a
// 2 GiB file downloaded over HTTP, a process writing without end for a minute then read from its start — against
// the idle figure, with the peak of each (sampled every 50 ms), the figure 10 s later and V8's own count beside
// it (what the collector holds, not what it keeps); the download's speed beside an engine exec of `cat` of the
// same file and the agent alone reading it (the bench's own connection); and the machine's disk under that
// process's record.
import { PassThrough, Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { containerName, RECORDS_DIR } from '../src/providers/docker/container-spec.ts';
import { engineExec } from './engine-exec.ts';
import { mib, ms, verdict, type MachinesBench } from './machines-bench.ts';
import { rssOf, sleep } from './support.ts';

const TARGET_RISE = 30 * 1024 * 1024;
const RUN_BYTES = 1_000_000_000;
const FILE = '/root/bench-2g';
const FILE_BYTES = 2 * 1024 ** 3;
const FLOOD_MS = Number(process.env.BENCH_FLOOD_SECONDS ?? 60) * 1000;
/** The agent keeps the last 64 MiB of a process's output (agent/API.md). */
const OUTPUT_KEPT = 64 * 1024 * 1024;
const READS_FROM_START = 3;
const SAMPLE_MS = 50;
/** Long enough for V8's memory reducer, which collects once a busy isolate goes quiet. */
const SETTLE_MS = 10_000;
const RUN_POLL_MS = 100;

/** Measures and prints; answers the rows of bench/machines.ts's summary table. */
export async function memoryFigures(bench: MachinesBench): Promise<string[]> {
  const summary: string[] = [];
  const rss = () => rssOf(bench.service.process.pid!);
  const id = await bench.createMachine('memory');
  await bench.seenRunning([id]);
  const container = bench.docker.getContainer(containerName(id));

  /** A run through the API, polled until it ends: its record as the service keeps it. */
  async function run(command: string) {
    const queued = await bench.api<{ id: string }>('POST', `/api/machines/${id}/runs`, { command });
    if (queued.status !== 201) throw new Error(`POST /runs: ${queued.status} ${JSON.stringify(queued.json)}`);
    for (;;) {
      const { json } = await bench.api<{ status: string; stdout: string; truncated: boolean; exitCode: number | null }>('GET', `/api/runs/${queued.json.id}`);
      if (json.status === 'failed' || (json.status === 'succeeded' && json.exitCode !== 0)) throw new Error(`${command}: ${JSON.stringify(json).slice(0, 300)}`);
      if (json.status === 'succeeded') return json;
      await sleep(RUN_POLL_MS);
    }
  }
  /** A file downloaded through the API, its bytes counted and let go: how many. */
  async function download(path: string): Promise<number> {
    const response = await fetch(`${bench.base}/api/machines/${id}/files?${new URLSearchParams({ path })}`, { headers: bench.auth });
    if (response.status !== 200 || response.body === null) throw new Error(`GET /files: ${response.status} ${await response.text()}`);
    let bytes = 0;
    for await (const chunk of response.body) bytes += chunk.length;
    return bytes;
  }
  async function startProcess(command: string): Promise<string> {
    const started = await bench.api<{ id: string }>('POST', `/api/machines/${id}/processes`, { command });
    if (started.status !== 201) throw new Error(`POST /processes: ${started.status} ${JSON.stringify(started.json)}`);
    return started.json.id;
  }
  const readOutput = (procId: string, offset: number) =>
    bench.api<{ stdout: string; offset: number; dropped: number; running: boolean }>('GET', `/api/machines/${id}/processes/${procId}/output?offset=${offset}`);
  const kill = (procId: string) => bench.api('POST', `/api/machines/${id}/processes/${procId}/signal`, { signal: 'KILL' });
  /** What a user does without us: the engine's exec of `cat`, its stdout counted as it streams. */
  async function engineCat(path: string): Promise<number> {
    const exec = await container.exec({ Cmd: ['cat', path], AttachStdout: true, AttachStderr: true, Tty: false, User: 'root' });
    const stream = await exec.start({ hijack: true, stdin: false, Detach: false, Tty: false });
    let bytes = 0;
    const counter = new Writable({ write: (chunk: Buffer, _encoding, done) => void ((bytes += chunk.length), done()) });
    bench.docker.modem.demuxStream(stream, counter, new PassThrough().resume());
    await finished(stream);
    return bytes;
  }
  /** The service's way to the file without the service: the bench's own agent connection. */
  async function agentRead(path: string): Promise<number> {
    const found = await (await bench.agents.of(id)).read(path);
    if (found?.type !== 'file') throw new Error(`agent alone: ${path} is ${found?.type ?? 'missing'}`);
    let bytes = 0;
    for await (const chunk of found.content) bytes += (chunk as Buffer).length;
    return bytes;
  }
  const heap = async () => {
    const memory = await bench.service.request<NodeJS.MemoryUsage>({ cmd: 'memory' });
    return `V8 heap used ${mib(memory.heapUsed)} of ${mib(memory.heapTotal)} committed, external ${mib(memory.external)}`;
  };

  // The code the floods below go through, loaded and warm before the idle figure: each of them small.
  await run('head -c 2000000 /dev/zero | tr "\\0" x');
  await run('head -c 1000000 /dev/zero > /root/bench-1m');
  await download('/root/bench-1m');
  const warmUp = await startProcess('yes | head -c 3000000; sleep 600');
  await sleep(500);
  await readOutput(warmUp, 0);
  await kill(warmUp);
  await sleep(2000);

  const idle = rss();
  console.log(`  the service's memory through floods of bytes from machine ${id}: idle VmRSS ${mib(idle)} (after one small run, download and process read; ${await heap()})`);
  summary.push(`| service VmRSS idle (memory part) | ${mib(idle)} | baseline |`);

  /** The flood, with the service's RSS sampled throughout: its figure after (judged), and its peak. */
  async function flood<T>(what: string, act: () => Promise<T>, describe: (answer: T, took: number) => string): Promise<T> {
    let peak = rss();
    const sampler = setInterval(() => (peak = Math.max(peak, rss())), SAMPLE_MS);
    const started = performance.now();
    let answer: T;
    try {
      answer = await act();
    } finally {
      clearInterval(sampler);
    }
    const took = performance.now() - started;
    const after = rss();
    peak = Math.max(peak, after);
    const rise = after - idle;
    const heapAfter = await heap();
    await sleep(SETTLE_MS);
    const settled = rss();
    console.log(`    ${what} (${describe(answer, took)}):`);
    console.log(`      VmRSS ${mib(after)} after, ${mib(rise)} over idle (target ≤ ${mib(TARGET_RISE)}) ${verdict(rise <= TARGET_RISE)}; peak ${mib(peak)} (${mib(peak - idle)} over idle); ${heapAfter}`);
    console.log(`      ${SETTLE_MS / 1000} s later: VmRSS ${mib(settled)}, ${mib(settled - idle)} over idle; ${await heap()}`);
    summary.push(`| service VmRSS, ${what}: after (over idle) / ${SETTLE_MS / 1000} s later / peak | ${mib(after)} (${mib(rise)}) / ${mib(settled)} (${mib(settled - idle)}) / ${mib(peak)} | ≤ ${mib(TARGET_RISE)} over idle ${verdict(rise <= TARGET_RISE)} |`);
    return answer;
  }

  await flood('a run printing 1 GB', () => run(`head -c ${RUN_BYTES} /dev/zero | tr "\\0" x`), (record, took) => {
    if (!record.truncated || record.stdout.length !== 1024 * 1024) throw new Error(`the 1 GB run kept ${record.stdout.length} characters, truncated ${record.truncated}`);
    return `${ms(took)}, 1 MiB of stdout kept`;
  });

  await run(`fallocate -l ${FILE_BYTES} ${FILE} 2>/dev/null || head -c ${FILE_BYTES} /dev/zero > ${FILE}`);
  /** MiB/s of a read of the whole file. */
  const speed = async (read: (path: string) => Promise<number>) => {
    const started = performance.now();
    const bytes = await read(FILE);
    if (bytes !== FILE_BYTES) throw new Error(`a read of ${FILE} gave ${bytes} bytes, not ${FILE_BYTES}`);
    return Math.round(FILE_BYTES / 1024 / 1024 / ((performance.now() - started) / 1000));
  };
  const [catSpeed, agentSpeed] = [await speed(engineCat), await speed(agentRead)];
  await flood('a 2 GiB file downloaded', () => download(FILE), (bytes, took) => {
    if (bytes !== FILE_BYTES) throw new Error(`the download had ${bytes} bytes, not ${FILE_BYTES}`);
    const downloadSpeed = Math.round(bytes / 1024 / 1024 / (took / 1000));
    summary.push(`| 2 GiB file: GET /files / agent alone / engine exec cat | ${downloadSpeed} / ${agentSpeed} / ${catSpeed} MiB/s | |`);
    return `${ms(took)}, ${downloadSpeed} MiB/s; just before, an engine exec of cat ${catSpeed} MiB/s, the agent alone ${agentSpeed} MiB/s`;
  });
  await run(`rm -f ${FILE}`);

  const yes = await startProcess('yes');
  const reads = await flood(`\`yes\` for ${FLOOD_MS / 1000} s, then read ${READS_FROM_START} times from offset 0`, async () => {
    await sleep(FLOOD_MS);
    const answers = [];
    for (let i = 0; i < READS_FROM_START; i++) answers.push((await readOutput(yes, 0)).json);
    return answers;
  }, (answers) => `dropped ${answers.map((answer) => mib(answer.dropped)).join(', ')}; ${mib(answers.at(-1)!.offset)} written by the last read`);
  await kill(yes);
  const dropped = reads.every((read) => read.dropped > 0);
  if (!reads.every((read) => read.running)) throw new Error('`yes` ended before it was killed');
  const du = await engineExec(container, ['/bin/sh', '-c', `du -sk ${RECORDS_DIR}/procs/${yes} && du -sh ${RECORDS_DIR}/procs/${yes} && ls -l ${RECORDS_DIR}/procs/${yes}`]);
  const kept = Number(du.stdout.toString().split(/\s/)[0]) * 1024;
  // The kept output and the record's few small files: within a MiB over the bound.
  const bounded = kept <= OUTPUT_KEPT + 1024 * 1024;
  console.log(`    \`yes\`'s record on the machine's disk: ${mib(kept)} (du -sh: ${du.stdout.toString().split('\n')[1]!.split(/\s/)[0]}; the agent keeps the last ${mib(OUTPUT_KEPT)}) ${verdict(bounded)}; every read from 0 said dropped > 0: ${verdict(dropped)}`);
  console.log(du.stdout.toString().split('\n').slice(2).filter(Boolean).map((line) => `      ${line}`).join('\n'));
  summary.push(`| \`yes\` for ${FLOOD_MS / 1000} s: its record on the machine's disk; reads from 0 dropped | ${mib(kept)}; ${reads.map((read) => mib(read.dropped)).join(', ')} | ≤ ${mib(OUTPUT_KEPT)} kept ${verdict(bounded)}; dropped > 0 ${verdict(dropped)} |`);

  await bench.destroyAll([id]);
  return summary;
}
