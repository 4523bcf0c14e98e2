// bench/machines.ts's placement part (BENCH_ONLY=placement for it alone): create → running through placement over
// three hosts beside the same on one host. Each host is a `dockerd` of its own in a network namespace
// (test/support/engines.ts, engines 1–3, as the multi-host tests make them), so both sides boot on the same storage
// driver; two services, each with a database of its own: one with MACHINE_HOSTS naming the first engine alone, one
// naming all three. Their creates go in turn, one machine at a time, each destroyed before the next. The target: the
// three hosts' p50 within the noise of the one host's (placement is a lock and two counts in the create's transaction).
import { ms, verdict, waysReport } from './machines-bench.ts';
import { percentile, postgresSchema, sleep, startChild, type Child } from './support.ts';
import { startTestEngines, stopTestEngine, type TestEngine } from '../test/support/engines.ts';

const ROUNDS = Number(process.env.BENCH_PLACEMENT_BOOTS ?? 20);
const POLL_MS = 10;

/** One service over the given engines, with a user and an API key. */
async function serviceOver(engines: TestEngine[], databaseUrl: string | undefined) {
  const schema = databaseUrl ? await postgresSchema(databaseUrl) : undefined;
  const child: Child = await startChild(new URL('./machines.child.ts', import.meta.url).pathname, {
    MACHINE_PROVIDER: 'docker',
    MACHINE_HOSTS: engines.map((engine) => `${engine.name}=${engine.address}`).join(','),
    MACHINE_CPU_OVERCOMMIT: '64',
    BILLING: 'off',
    RATE_LIMIT: 'off',
    ...(schema ? { BENCH_SCHEMA: schema.schema } : {}),
  });
  const base = `http://127.0.0.1:${child.ready.port}`;
  const registered = await fetch(`${base}/api/auth/register`, {
    method: 'POST',
    headers: { origin: base, 'content-type': 'application/json' },
    body: JSON.stringify({ email: 'placement@example.com', password: 'correct horse battery', name: 'Bench' }),
  });
  if (registered.status !== 201) throw new Error(`register: ${registered.status} ${await registered.text()}`);
  const cookie = String(registered.headers.get('set-cookie')).split(';')[0]!;
  const keyed = await fetch(`${base}/api/keys`, { method: 'POST', headers: { origin: base, cookie, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'bench' }) });
  const auth = { authorization: `Bearer ${((await keyed.json()) as { key: string }).key}` };
  const api = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`${base}${path}`, { method, headers: { ...auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    return { status: response.status, json: (await response.json()) as Record<string, unknown> };
  };
  /** create → running of one machine (polled every POLL_MS), then its destroy; answers the first. */
  const bootOnce = async (name: string): Promise<number> => {
    const started = performance.now();
    const created = await api('POST', '/api/machines', { name });
    if (created.status !== 201) throw new Error(`POST /api/machines: ${created.status} ${JSON.stringify(created.json)}`);
    const id = created.json.id as string;
    try {
      for (;;) {
        const machine = await api('GET', `/api/machines/${id}`);
        if (machine.json.status === 'running') break;
        if (machine.json.status === 'error') throw new Error(`machine ${id} failed to boot: ${JSON.stringify(machine.json)}`);
        if (performance.now() - started > 180_000) throw new Error(`machine ${id} not running after 180 s`);
        await sleep(POLL_MS);
      }
      return performance.now() - started;
    } finally {
      const destroyed = await api('DELETE', `/api/machines/${id}`);
      if (destroyed.status !== 200) throw new Error(`DELETE ${id}: ${destroyed.status} ${JSON.stringify(destroyed.json)}`);
    }
  };
  return {
    bootOnce,
    async close() {
      await child.stop();
      await schema?.drop();
    },
  };
}

/** Measures and prints; answers the rows of bench/machines.ts's summary table. */
export async function placementFigures(databaseUrl: string | undefined): Promise<string[]> {
  const engines = await startTestEngines([1, 2, 3]);
  const services: Array<Awaited<ReturnType<typeof serviceOver>>> = [];
  try {
    const one = await serviceOver(engines.slice(0, 1), databaseUrl);
    services.push(one);
    const three = await serviceOver(engines, databaseUrl);
    services.push(three);
    const ways = { 'one host': one, 'three hosts': three };
    const times: Record<keyof typeof ways, number[]> = { 'one host': [], 'three hosts': [] };
    // One of each first, unmeasured (each engine's caches), then in turn: the same load on both.
    for (let i = 0; i < engines.length; i++) await three.bootOnce(`warm-${i}`);
    await one.bootOnce('warm');
    for (let i = 0; i < ROUNDS; i++) {
      for (const way of Object.keys(ways) as Array<keyof typeof ways>) times[way].push(await ways[way].bootOnce(`placed-${i}`));
    }
    console.log(`  create → running through placement, ${ROUNDS} of each in turn (engines in network namespaces, overlay2):`);
    const rows = waysReport('create → running, placed', times, 'one host');
    // The noise: the spread of one host's own boots. Placement is within it when three hosts' p50 is inside it.
    const [low, high] = [percentile(times['one host'], 25), percentile(times['one host'], 75)];
    const placed = percentile(times['three hosts'], 50);
    const within = placed <= high;
    console.log(`    three hosts' p50 ${ms(placed)}; one host's middle half ${ms(low)}–${ms(high)} (target: within it) ${verdict(within)}`);
    return [...rows, `| placement over three hosts, p50 within one host's middle half (${ms(low)}–${ms(high)}) | ${ms(placed)} | ${verdict(within)} |`];
  } finally {
    for (const service of services) await service.close().catch((error: unknown) => console.error('a placement service did not stop', error));
    await Promise.all(engines.map((engine) => stopTestEngine(engine)));
  }
}
