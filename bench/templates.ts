// bench/machines.ts's templates part (BENCH_ONLY=templates for it alone): create → running of a machine from a
// template (a machine's disk saved with POST /api/templates: with Docker, a committed image) beside a plain create,
// interleaved, each destroyed before the next; the target is a template's p50 within 1.5× the plain one's (issue 41).
// Also the time to save the template (the commit, the machine frozen meanwhile) and a fork of several machines at once.
import Docker from 'dockerode';
import { KEPT_REPOSITORY, templateImage } from '../src/providers/docker/templates.ts';
import { ms, verdict, waysReport, type MachinesBench } from './machines-bench.ts';
import { percentile } from './support.ts';

const ROUNDS = Number(process.env.BENCH_TEMPLATE_BOOTS ?? 10);
const FORK_COUNT = 5;
const TARGET_RATIO = 1.5;
/** What the source machine writes before it is saved: a template with something in it. */
const PAYLOAD_MB = 50;

/** Measures and prints; answers the rows of bench/machines.ts's summary table. */
export async function templateFigures(bench: MachinesBench): Promise<string[]> {
  const source = await bench.createMachine('template-source');
  await bench.seenRunning([source]);
  await bench.mcpTool(source, 'run_command', { command: `head -c ${PAYLOAD_MB * 1024 * 1024} /dev/urandom > /root/payload.bin && echo toolchain > /root/marker` });
  const savingStarted = performance.now();
  const saved = await bench.api<{ id: string; sizeBytes: number }>('POST', '/api/templates', { machineId: source, name: 'bench-template' });
  const saveMs = performance.now() - savingStarted;
  if (saved.status !== 201) throw new Error(`POST /api/templates: ${saved.status} ${JSON.stringify(saved.json)}`);
  const template = saved.json;
  console.log(`  templates: saved a running machine with ${PAYLOAD_MB} MiB written (${(template.sizeBytes / 1024 ** 2).toFixed(0)} MiB image) in ${ms(saveMs)}`);
  try {
    const times: Record<'plain create' | 'from template', number[]> = { 'plain create': [], 'from template': [] };
    const bootOnce = async (way: keyof typeof times, i: number) => {
      const started = performance.now();
      const id = await bench.createMachine(`${way === 'plain create' ? 'plain' : 'templated'}-${i}`, way === 'plain create' ? {} : { template: template.id });
      await bench.seenRunning([id]);
      times[way].push(performance.now() - started);
      if (way === 'from template' && i === 0) {
        // The file's bytes, not JSON: read past the bench's JSON helper.
        const marker = await fetch(`${bench.base}/api/machines/${id}/files?path=/root/marker`, { headers: bench.auth });
        const text = await marker.text();
        if (marker.status !== 200 || text !== 'toolchain\n') throw new Error(`the template's machine has no /root/marker: ${marker.status} ${text.slice(0, 200)}`);
      }
      await bench.destroyAll([id]);
    };
    // One of each first, unmeasured (the engine's caches), then in turn: the same load on both.
    await bootOnce('plain create', -1);
    await bootOnce('from template', -1);
    times['plain create'] = [];
    times['from template'] = [];
    for (let i = 0; i < ROUNDS; i++) {
      await bootOnce('plain create', i);
      await bootOnce('from template', i);
    }
    console.log(`  create → running, ${ROUNDS} of each in turn:`);
    const rows = waysReport('create → running', times, 'plain create', { 'from template': TARGET_RATIO });

    const forkStarted = performance.now();
    const forked = await bench.api<{ data: Array<{ id: string }> }>('POST', `/api/machines/${source}/fork`, { count: FORK_COUNT });
    if (forked.status !== 201) throw new Error(`fork: ${forked.status} ${JSON.stringify(forked.json)}`);
    const forkAnsweredMs = performance.now() - forkStarted;
    const copies = forked.json.data.map((copy) => copy.id);
    await bench.seenRunning(copies);
    const forkRunningMs = performance.now() - forkStarted;
    await bench.destroyAll(copies);
    console.log(`  fork of ${FORK_COUNT} at once: answered (201) after ${ms(forkAnsweredMs)}, all running after ${ms(forkRunningMs)}`);
    const ratio = percentile(times['from template'], 50) / percentile(times['plain create'], 50);
    console.log(`  a machine from a template starts in ${ratio.toFixed(2)}× a plain create's time (target ≤ ${TARGET_RATIO}×) ${verdict(ratio <= TARGET_RATIO)}`);
    return [
      ...rows,
      `| save a running machine as a template (${PAYLOAD_MB} MiB written) | ${ms(saveMs)} | |`,
      `| fork ${FORK_COUNT} at once: all running | ${ms(forkRunningMs)} (201 after ${ms(forkAnsweredMs)}) | |`,
    ];
  } finally {
    await bench.api('DELETE', `/api/templates/${template.id}`);
    // Whatever the service left (it logs a failure): the bench leaves nothing on the engine.
    const docker = new Docker();
    await docker.getImage(templateImage(template.id)).remove({ force: true }).catch(() => {});
    // The fork's image, kept while its copies stood on it (the service collects it later; the bench at once). After a
    // failure a machine of the template may still stand on its kept image: then it stays for the service to collect.
    for (const image of await docker.listImages({ filters: { reference: [KEPT_REPOSITORY] } })) {
      for (const tag of (image.RepoTags ?? []).filter((tag) => tag.includes(source) || tag.includes(template.id))) await docker.getImage(tag).remove().catch(() => {});
    }
  }
}
