// bench/machines.ts's screens part (BENCH_ONLY=screens for it alone): screenshots through the service against
// the engine's own exec of the provider's screenshot command, and the live view's frame rate for one viewer and
// for ten of one machine through the service's WebSocket bridge, against the same viewers on a relay of their own
// (the agent's connection to x11vnc's port, as the service opens it, without the service), with the service's CPU
// per viewer.
import { loadavg } from 'node:os';
import { containerName } from '../src/providers/docker/container-spec.ts';
import { engineExec } from './engine-exec.ts';
import { dockerScreen, SCREENSHOT } from '../src/providers/docker/screen.ts';
import type { ProviderMachine } from '../src/providers/provider.ts';
import { DEFAULT_SCREEN } from '../src/providers/screen-size.ts';
import { ms, type MachinesBench } from './machines-bench.ts';
import { rfbViewer, type Viewer } from './rfb.ts';
import { cpuMicros, percentile, sleep } from './support.ts';

const SCREENSHOTS = Number(process.env.BENCH_SCREENSHOTS ?? 50);
const MANY_VIEWERS = Number(process.env.BENCH_VIEWERS ?? 10);
const WINDOW_MS = Number(process.env.BENCH_VIEW_SECONDS ?? 10) * 1000;
const ROUNDS = Number(process.env.BENCH_VIEW_ROUNDS ?? 3);
/** After every viewer has had its first update: its full first picture is not a frame of the stream. */
const SETTLE_MS = 2000;
/**
 * What changes the screen: a terminal printing the time every 10 ms, more often than x11vnc looks for changes
 * (about every 20–30 ms by default), so that a viewer gets as many updates as the chain can deliver.
 */
const BUSY_TERMINAL = `setsid xterm -geometry 100x30+0+0 -e bash -c 'while :; do date +%T.%N; sleep 0.01; done' </dev/null >/dev/null 2>&1 &`;
const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;

/** Measures and prints; answers the rows of bench/machines.ts's summary table. */
export async function screenFigures(bench: MachinesBench): Promise<string[]> {
  const summary: string[] = [];
  const load = () => loadavg().map((value) => value.toFixed(1)).join(' ');
  const id = await bench.createMachine('screens');
  console.log(`  screens, on machine ${id} (load average ${load()}):`);
  await bench.seenRunning([id]);
  const container = bench.docker.getContainer(containerName(id));
  const machine: ProviderMachine = { id, name: 'screens', size: 'small', labels: {}, status: 'running', statusChangedAt: Date.now(), screen: DEFAULT_SCREEN };
  const display = dockerScreen(bench.agents);
  // The display and its VNC server start with the machine: wait for the server, as the service's stream does.
  const vnc = await display.stream(machine);
  if (vnc === null) throw new Error('the machine has no screen or no VNC server: is its image the default one (npm run machine-image)?');
  vnc.close();
  await engineExec(container, ['/bin/sh', '-c', BUSY_TERMINAL]);

  // ── screenshots ────────────────────────────────────────────────────────────────────────────────────
  type Way = 'GET /screenshot' | 'mcp screenshot' | 'agent alone' | 'dockerode exec';
  const WAYS: Way[] = ['GET /screenshot', 'mcp screenshot', 'agent alone', 'dockerode exec'];
  const BASELINE: Way = 'dockerode exec';
  const shoot: Record<Way, () => Promise<Buffer>> = {
    async 'GET /screenshot'() {
      const response = await fetch(`${bench.base}/api/machines/${id}/screenshot`, { headers: bench.auth });
      if (response.status !== 200) throw new Error(`GET /screenshot: ${response.status} ${await response.text()}`);
      return Buffer.from(await response.arrayBuffer());
    },
    async 'mcp screenshot'() {
      const body = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'screenshot', arguments: {} } };
      const response = await fetch(`${bench.base}/api/machines/${id}/mcp`, { method: 'POST', headers: { ...bench.mcpHeaders, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const answer = (await response.json()) as { result?: { content?: Array<{ data?: string }> } };
      const data = answer.result?.content?.[0]?.data;
      if (data === undefined) throw new Error(`mcp screenshot: ${response.status} ${JSON.stringify(answer).slice(0, 300)}`);
      return Buffer.from(data, 'base64');
    },
    // The service's program in the machine (a check for the display, then scrot) through the agent, without the service.
    async 'agent alone'() {
      return (await display.screenshot(machine))!.body;
    },
    // What a user does without us: the engine's exec of the same command, reading the PNG back.
    async 'dockerode exec'() {
      return (await engineExec(container, ['/bin/sh', '-c', SCREENSHOT])).stdout;
    },
  };
  const timed = async (way: Way) => {
    const started = performance.now();
    const png = await shoot[way]();
    const took = performance.now() - started;
    if (!png.subarray(0, 8).equals(PNG)) throw new Error(`${way}: not a PNG (${png.length} bytes)`);
    return { took, size: png.length };
  };
  for (const way of WAYS) await timed(way); // warm-up
  const times = Object.fromEntries(WAYS.map((way) => [way, [] as number[]])) as Record<Way, number[]>;
  const sizes: number[] = [];
  for (let round = 0; round < SCREENSHOTS; round++) {
    for (let i = 0; i < WAYS.length; i++) {
      const way = WAYS[(round + i) % WAYS.length]!;
      const { took, size } = await timed(way);
      times[way].push(took);
      sizes.push(size);
    }
  }
  const baseline = percentile(times[BASELINE], 50);
  console.log(`  screenshot of a ${DEFAULT_SCREEN.width}×${DEFAULT_SCREEN.height} screen (PNG ${Math.round(percentile(sizes, 50) / 1024)} KB), ${SCREENSHOTS} each, interleaved:`);
  for (const way of WAYS) {
    const [p50, p99] = [percentile(times[way], 50), percentile(times[way], 99)];
    console.log(`    ${way.padEnd(20)} p50 ${ms(p50).padStart(8)}, p99 ${ms(p99).padStart(8)}; ${(p50 / baseline).toFixed(2)}× ${BASELINE}`);
    summary.push(`| screenshot: ${way} | p50 ${ms(p50)}, p99 ${ms(p99)}, ${(p50 / baseline).toFixed(2)}× | ${way === BASELINE ? 'baseline' : ''} |`);
  }

  // ── live view ──────────────────────────────────────────────────────────────────────────────────────
  type Path = 'through the service' | 'agent relay alone';
  const link = await bench.api<{ url: string }>('POST', `/api/machines/${id}/live-view`);
  if (link.status !== 201) throw new Error(`POST /live-view: ${link.status} ${JSON.stringify(link.json)}`);
  const streamUrl = `${link.json.url.replace(/^http/, 'ws')}/stream`;

  const connect: Record<Path, () => Promise<Viewer>> = {
    async 'through the service'() {
      const socket = new WebSocket(streamUrl);
      socket.binaryType = 'arraybuffer';
      const viewer = rfbViewer({ send: (bytes) => socket.send(bytes as Uint8Array<ArrayBuffer>), close: () => socket.close() });
      socket.onmessage = (event) => viewer.deliver(Buffer.from(event.data as ArrayBuffer));
      socket.onclose = (event) => viewer.fail(new Error(`the WebSocket closed: ${event.code} ${event.reason}`));
      return viewer;
    },
    // The service's relay (the agent's connection to x11vnc's port), without the service.
    async 'agent relay alone'() {
      const relay = (await display.stream(machine))!;
      const viewer = rfbViewer({ send: (bytes) => relay.write(bytes), close: () => relay.close() });
      relay.output.on('data', (chunk: Buffer) => viewer.deliver(chunk));
      relay.output.once('end', () => viewer.fail(new Error('the relay ended')));
      return viewer;
    },
  };

  interface Window {
    fps: number[];
    bytesPerSecond: number;
    serviceCpu: number;
    benchCpu: number;
  }
  const failed = (viewers: Viewer[]) => viewers.find((viewer) => viewer.error)?.error;
  /** `count` viewers by `path`, each counted over WINDOW_MS once all of them stream; CPU in % of one core. */
  async function watch(path: Path, count: number): Promise<Window> {
    const viewers = await Promise.all(Array.from({ length: count }, () => connect[path]()));
    try {
      const deadline = performance.now() + 30_000;
      while (viewers.some((viewer) => viewer.frames === 0)) {
        const error = failed(viewers);
        if (error) throw error;
        if (performance.now() > deadline) throw new Error(`${path}: ${viewers.filter((v) => v.frames === 0).length} of ${count} viewers had no picture after 30 s`);
        await sleep(50);
      }
      await sleep(SETTLE_MS);
      for (const viewer of viewers) viewer.reset();
      const [service, own, started] = [cpuMicros(bench.service.process.pid), cpuMicros(), performance.now()];
      await sleep(WINDOW_MS);
      const seconds = (performance.now() - started) / 1000;
      const percent = (micros: number) => micros / seconds / 1e4;
      const window = {
        fps: viewers.map((viewer) => viewer.frames / seconds),
        bytesPerSecond: viewers.reduce((sum, viewer) => sum + viewer.bytes, 0) / seconds / count,
        serviceCpu: percent(cpuMicros(bench.service.process.pid) - service),
        benchCpu: percent(cpuMicros() - own),
      };
      const error = failed(viewers);
      if (error) throw error;
      return window;
    } finally {
      for (const viewer of viewers) viewer.close();
      await sleep(500); // the relays' execs end before the next window
    }
  }

  console.log(`  live view of a terminal printing the time every 10 ms: updates each viewer got in ${WINDOW_MS / 1000} s windows, ${ROUNDS} rounds, the paths in turn:`);
  for (const count of [1, MANY_VIEWERS]) {
    const windows: Record<Path, Window[]> = { 'through the service': [], 'agent relay alone': [] };
    for (let round = 0; round < ROUNDS; round++) {
      const order: Path[] = round % 2 === 0 ? ['through the service', 'agent relay alone'] : ['agent relay alone', 'through the service'];
      for (const path of order) windows[path].push(await watch(path, count));
    }
    const fps = (path: Path) => mean(windows[path].map((window) => mean(window.fps)));
    // With no viewer on the service, its CPU is what it spends anyway (its jobs): the agent relay's windows measure it.
    const idle = mean(windows['agent relay alone'].map((window) => window.serviceCpu));
    const perViewer = (mean(windows['through the service'].map((window) => window.serviceCpu)) - idle) / count;
    const viewers = `${count} viewer${count === 1 ? '' : 's'}`;
    for (const path of ['through the service', 'agent relay alone'] as const) {
      const rounds = windows[path].map((window) => `${mean(window.fps).toFixed(1)}${count > 1 ? ` (slowest ${Math.min(...window.fps).toFixed(1)})` : ''}`).join(', ');
      const kb = Math.round(mean(windows[path].map((window) => window.bytesPerSecond)) / 1024);
      const cpu = `service CPU ${windows[path].map((window) => `${window.serviceCpu.toFixed(1)}%`).join(', ')}, the bench's viewers ${windows[path].map((window) => `${window.benchCpu.toFixed(1)}%`).join(', ')}`;
      console.log(`    ${viewers}, ${path.padEnd(19)} ${fps(path).toFixed(1)} fps per viewer (rounds: ${rounds}), all ${(fps(path) * count).toFixed(0)} fps, ${kb} KB/s per viewer; ${cpu}`);
    }
    const ratio = fps('through the service') / fps('agent relay alone');
    const frameMicros = (perViewer * 1e4) / fps('through the service');
    console.log(`    ${viewers}: through the service ${ratio.toFixed(2)}× the agent relay's fps; the service's CPU ${perViewer.toFixed(1)}% of a core per viewer (idle ${idle.toFixed(1)}% taken off), ${Math.round(frameMicros)} µs per update relayed`);
    summary.push(`| live view, ${viewers}: fps per viewer through the service / agent relay alone | ${fps('through the service').toFixed(1)} / ${fps('agent relay alone').toFixed(1)} (${ratio.toFixed(2)}×), all ${(fps('through the service') * count).toFixed(0)} | |`);
    summary.push(`| live view, ${viewers}: service CPU per viewer | ${perViewer.toFixed(1)}% of a core (${Math.round(frameMicros)} µs per update) | |`);
  }
  console.log(`  (load average ${load()})`);
  await bench.destroyAll([id]);
  return summary;
}
