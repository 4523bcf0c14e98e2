// bench/machines.ts's previews part (BENCH_ONLY=previews for it alone): a small HTTP app in a machine (Python's
// http.server, test/support/preview-app.ts) reached through its preview URL. Latency: one small page, p50 through
// the preview (the service, its agent stream, the app) over the same request made inside the machine (a Python
// client there, a new connection each time as the preview opens one), with the agent alone beside them (the
// bench's own agent stream to the port, the request written by hand). Throughput: 100 MB through the preview
// against the agent's raw port stream (AgentClient.portStream, the preview's own: the same HTTP/2 settings, the
// request's head with the stream's opening), without the service; with the CPU time each way costs the service and
// the bench's client (steadier than the rates on a shared machine).
import { Agent, request as httpRequest } from 'node:http';
import { MACHINE_APP } from '../test/support/preview-app.ts';
import { mib, ms, verdict, waysReport, type MachinesBench } from './machines-bench.ts';
import { cpuMicros, interleavedTimes, sleep } from './support.ts';

const APP_PORT = 8000;
const REQUESTS = Number(process.env.BENCH_PREVIEW_REQUESTS ?? 200);
const BIG_BYTES = 100 * 1024 * 1024;
const DOWNLOADS = Number(process.env.BENCH_PREVIEW_DOWNLOADS ?? 3);
const TARGET_LATENCY_RATIO = 1.3;
const TARGET_THROUGHPUT_RATIO = 0.8;

/** The in-machine client: REQUESTS sequential GETs of the page, each on its own connection; their times in ms as JSON. */
const IN_MACHINE_CLIENT = `
import http.client, json, time
times = []
for i in range(${REQUESTS + 1}):
    started = time.perf_counter()
    connection = http.client.HTTPConnection('127.0.0.1', ${APP_PORT})
    connection.request('GET', '/page')
    response = connection.getresponse()
    response.read()
    connection.close()
    times.append((time.perf_counter() - started) * 1000)
print(json.dumps(times[1:]))
`;

/** Measures and prints; answers the rows of bench/machines.ts's summary table. */
export async function previewFigures(bench: MachinesBench): Promise<string[]> {
  const id = await bench.createMachine('previews');
  console.log(`  previews, on machine ${id}:`);
  await bench.seenRunning([id]);
  const written = await fetch(`${bench.base}/api/machines/${id}/files?path=/root/app.py`, { method: 'PUT', headers: { ...bench.auth, 'content-type': 'application/octet-stream' }, body: MACHINE_APP });
  if (written.status !== 204) throw new Error(`PUT /files: ${written.status} ${await written.text()}`);
  const started = await bench.api('POST', `/api/machines/${id}/processes`, { command: `python3 /root/app.py ${APP_PORT}` });
  if (started.status !== 201) throw new Error(`POST /processes: ${started.status} ${JSON.stringify(started.json)}`);
  const { previewToken } = (await bench.api<{ previewToken: string }>('GET', `/api/machines/${id}/previews`)).json;
  const host = `${APP_PORT}-${id.replace('_', '-')}.localhost`;
  const { hostname, port } = new URL(bench.base);
  // Kept alive, as a browser keeps its connection to a host: each request still gets a stream of its own to the machine.
  const keepAlive = new Agent({ keepAlive: true, maxSockets: 1 });
  const agent = await bench.agents.of({ id: id });

  /** One GET through the preview; its body's size. */
  const viaPreview = (path: string) =>
    new Promise<number>((resolve, reject) => {
      const request = httpRequest({ host: hostname, port, path, agent: keepAlive, headers: { host, 'x-preview-token': previewToken } }, (response) => {
        let bytes = 0;
        response.on('data', (chunk: Buffer) => (bytes += chunk.length));
        response.on('end', () => (response.statusCode === 200 ? resolve(bytes) : reject(new Error(`preview ${path}: ${response.statusCode}`))));
      });
      request.on('error', reject);
      request.end();
    });
  /** One GET over the bench's own agent stream to the port, written by hand; the bytes of the whole answer. */
  const viaAgent = async (path: string) => {
    const stream = agent.portStream(APP_PORT);
    stream.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
    let bytes = 0;
    for await (const chunk of stream) bytes += (chunk as Buffer).length;
    return bytes;
  };

  for (let attempt = 0; ; attempt++) {
    try {
      await viaPreview('/page');
      break;
    } catch (error) {
      if (attempt === 100) throw error;
      await sleep(100);
    }
  }

  // ── latency ──────────────────────────────────────────────────────────────────────────────────────
  const inMachine = await agent.exec(['python3', '-c', IN_MACHINE_CLIENT], { timeoutMs: 120_000 });
  if (inMachine.exitCode !== 0) throw new Error(`the in-machine client: ${inMachine.stderr.toString()}`);
  const times = { 'inside the machine': JSON.parse(inMachine.stdout.toString()) as number[], ...(await interleavedTimes({ preview: () => viaPreview('/page'), 'agent alone': () => viaAgent('/page') }, REQUESTS)) };
  console.log(`    a small page, ${REQUESTS} requests each way:`);
  const summary = waysReport('preview request', times, 'inside the machine', { preview: TARGET_LATENCY_RATIO });

  // ── throughput ───────────────────────────────────────────────────────────────────────────────────
  const rates = { preview: [] as number[], 'agent alone': [] as number[] };
  /** CPU ms per 100 MB (BIG_BYTES): the service's, the bench's own (the client's side). */
  const cpu = { preview: { service: [] as number[], client: [] as number[] }, 'agent alone': { service: [] as number[], client: [] as number[] } };
  const servicePid = bench.service.process.pid!;
  for (let round = 0; round < DOWNLOADS; round++) {
    for (const [way, download] of Object.entries({ preview: () => viaPreview('/big'), 'agent alone': () => viaAgent('/big') }) as Array<[keyof typeof rates, () => Promise<number>]>) {
      const [serviceBefore, clientBefore] = [cpuMicros(servicePid), cpuMicros()];
      const begun = performance.now();
      const bytes = await download();
      if (bytes < BIG_BYTES) throw new Error(`${way}: ${bytes} bytes of ${BIG_BYTES}`);
      rates[way].push(bytes / ((performance.now() - begun) / 1000));
      cpu[way].service.push((cpuMicros(servicePid) - serviceBefore) / 1000);
      cpu[way].client.push((cpuMicros() - clientBefore) / 1000);
    }
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  for (const way of Object.keys(cpu) as Array<keyof typeof cpu>) {
    console.log(`    100 MB ${way}: CPU per download, median of ${DOWNLOADS}: service ${ms(median(cpu[way].service))}, the bench's client ${ms(median(cpu[way].client))}; rates ${rates[way].map((rate) => mib(rate)).join(', ')}/s`);
  }
  keepAlive.destroy();
  const best = (values: number[]) => Math.max(...values);
  const ratio = best(rates.preview) / best(rates['agent alone']);
  console.log(`    100 MB, best of ${DOWNLOADS}: preview ${mib(best(rates.preview))}/s, agent alone ${mib(best(rates['agent alone']))}/s; ${ratio.toFixed(2)}× (target ≥ ${TARGET_THROUGHPUT_RATIO}×) ${verdict(ratio >= TARGET_THROUGHPUT_RATIO)}`);
  summary.push(`| preview 100 MB download | ${mib(best(rates.preview))}/s, ${ratio.toFixed(2)}× the agent's raw port stream (${mib(best(rates['agent alone']))}/s) | ≥ ${TARGET_THROUGHPUT_RATIO}× ${verdict(ratio >= TARGET_THROUGHPUT_RATIO)} |`);
  console.log(`    (latency p50s: ${Object.entries(times).map(([way, values]) => `${way} ${ms([...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!)}`).join(', ')})`);
  await bench.destroyAll([id]);
  return summary;
}
