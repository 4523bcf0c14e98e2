// bench/machines.ts's terminal part (BENCH_ONLY=terminal for it alone): a keystroke's echo in a machine's terminal
// through the service's WebSocket (GET /api/machines/{id}/terminal, with the bench's API key), beside the same echo
// through the agent's PTY directly (the connection the service itself holds), the baseline. The terminal runs
// `cat > /dev/null`, so each key comes back as the PTY's own echo, one byte, and nothing else is printed.
import { ms, verdict, waysReport, type MachinesBench } from './machines-bench.ts';
import { percentile, sleep } from './support.ts';

const KEYSTROKES = Number(process.env.BENCH_KEYSTROKES ?? 400);
const ROUNDS = 4;
const TARGET_P99_MS = 50;
/** A line is ended this often: the PTY holds at most 4,095 bytes of a line. */
const LINE = 60;
const KEYS = 'abcdefghijklmnopqrstuvwxyz';

/** A terminal seen from the bench: send bytes, wait for bytes. */
interface Wire {
  send(bytes: Buffer): void;
  /** Resolves when what came since the last call holds `wanted`. */
  until(wanted: string): Promise<void>;
  close(): void;
}

function wireOf(send: (bytes: Buffer) => void, close: () => void): Wire & { deliver(chunk: Buffer): void } {
  let seen = '';
  let waiting: { wanted: string; resolve: () => void } | null = null;
  const check = () => {
    if (waiting !== null && seen.includes(waiting.wanted)) {
      const { resolve } = waiting;
      waiting = null;
      seen = '';
      resolve();
    }
  };
  return {
    send,
    close,
    deliver(chunk) {
      seen += chunk.toString('latin1');
      check();
    },
    until(wanted) {
      return new Promise((resolve) => {
        waiting = { wanted, resolve };
        check();
      });
    },
  };
}

/** Measures and prints; answers the rows of bench/machines.ts's summary table. */
export async function terminalFigures(bench: MachinesBench): Promise<string[]> {
  const id = await bench.createMachine('terminal');
  console.log(`  terminal, on machine ${id}:`);
  await bench.seenRunning([id]);
  type Way = 'through the service' | 'agent PTY alone';
  const open: Record<Way, () => Promise<Wire>> = {
    async 'through the service'() {
      // Node's WebSocket (undici's) takes the upgrade's headers as an option its types leave out.
      const socket = new WebSocket(`${bench.base.replace(/^http/, 'ws')}/api/machines/${id}/terminal?cols=120&rows=40`, { headers: bench.auth } as unknown as string[]);
      socket.binaryType = 'arraybuffer';
      const wire = wireOf((bytes) => socket.send(bytes as Uint8Array<ArrayBuffer>), () => socket.close());
      await new Promise<void>((resolve, reject) => {
        socket.onmessage = (event) => {
          if (typeof event.data === 'string') resolve();
          else wire.deliver(Buffer.from(event.data as ArrayBuffer));
        };
        socket.onclose = (event) => reject(new Error(`the terminal's WebSocket closed: ${event.code} ${event.reason}`));
      });
      return wire;
    },
    async 'agent PTY alone'() {
      const pty = await (await bench.agents.of({ id: id })).openTerminal({ cols: 120, rows: 40 });
      const wire = wireOf((bytes) => pty.write(bytes), () => pty.close());
      pty.output.on('data', (chunk: Buffer) => wire.deliver(chunk));
      return wire;
    },
  };

  async function echoes(way: Way, count: number): Promise<number[]> {
    const wire = await open[way]();
    try {
      wire.send(Buffer.from('exec cat > /dev/null\r'));
      await wire.until('/dev/null\r\n');
      await sleep(200); // cat is reading
      const times: number[] = [];
      for (let i = 0; i < count; i++) {
        if (i % LINE === LINE - 1) {
          wire.send(Buffer.from('\r'));
          await wire.until('\n');
          continue;
        }
        const key = KEYS[i % KEYS.length]!;
        const started = performance.now();
        wire.send(Buffer.from(key));
        await wire.until(key);
        times.push(performance.now() - started);
      }
      return times;
    } finally {
      wire.close();
    }
  }

  for (const way of Object.keys(open) as Way[]) await echoes(way, 20); // warm-up
  const times: Record<Way, number[]> = { 'through the service': [], 'agent PTY alone': [] };
  for (let round = 0; round < ROUNDS; round++) {
    const order: Way[] = round % 2 === 0 ? ['through the service', 'agent PTY alone'] : ['agent PTY alone', 'through the service'];
    for (const way of order) times[way].push(...(await echoes(way, Math.ceil(KEYSTROKES / ROUNDS))));
  }
  console.log(`  keystroke echo, ${times['through the service'].length} keys each way, ${ROUNDS} rounds in turn:`);
  const summary = waysReport('terminal keystroke echo', times, 'agent PTY alone');
  const p99 = percentile(times['through the service'], 99);
  const p99Ratio = p99 / percentile(times['agent PTY alone'], 99);
  console.log(`    through the service p99 ${ms(p99)} (target ≤ ${TARGET_P99_MS} ms) ${verdict(p99 <= TARGET_P99_MS)}; ${p99Ratio.toFixed(2)}× the agent PTY's p99`);
  summary.push(`| terminal keystroke echo p99 through the service | ${ms(p99)}, ${p99Ratio.toFixed(2)}× the agent PTY's | ≤ ${TARGET_P99_MS} ms ${verdict(p99 <= TARGET_P99_MS)} |`);
  await bench.destroyAll([id]);
  return summary;
}
