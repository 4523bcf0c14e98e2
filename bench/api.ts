// npm run bench:api — GET /api/me with an API key against a bare Fastify route answering the same JSON,
// /healthz latency during a burst of 50 concurrent sign-ins (argon2id at full cost), and a sign-in with an
// authenticator-app code against one with the password alone.
import autocannon from 'autocannon';
import { totpCodeAt } from '../src/accounts/totp.ts';
import { cpuMicros, percentile, ratioLine, startChild, type Child } from './support.ts';

const DURATION_SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = 32;
const TARGET = 0.6;

/** Requests per second, and the server's CPU µs per request (steadier than the rate on a shared machine). */
async function requestsPerSecond(server: Child, url: string, headers: Record<string, string>): Promise<{ rate: number; cpu: number }> {
  const cpuBefore = cpuMicros(server.process.pid);
  const result = await autocannon({ url, connections: CONNECTIONS, duration: DURATION_SECONDS, headers });
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${url}: ${result.non2xx} non-2xx answers, ${result.errors} errors`);
  return { rate: result.requests.average, cpu: (cpuMicros(server.process.pid) - cpuBefore) / result.requests.total };
}

async function post(url: string, body: object, headers: Record<string, string> = {}): Promise<Response> {
  const origin = new URL(url).origin;
  return fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', origin, ...headers }, body: JSON.stringify(body) });
}

async function signedUpWithKey(base: string): Promise<string> {
  const registered = await post(`${base}/api/auth/register`, { email: 'bench@example.com', password: 'correct horse battery', name: 'Bench' });
  if (registered.status !== 201) throw new Error(`register: ${registered.status} ${await registered.text()}`);
  const cookie = String(registered.headers.get('set-cookie')).split(';')[0]!;
  const created = await post(`${base}/api/keys`, { name: 'bench' }, { cookie });
  return ((await created.json()) as { key: string }).key;
}

const serviceModule = new URL('./service.child.ts', import.meta.url).pathname;
const bareModule = new URL('./bare.child.ts', import.meta.url).pathname;

console.log(`bench/api: ${DURATION_SECONDS} s per run, ${CONNECTIONS} connections, alternating runs`);
const service: Child = await startChild(serviceModule, { RATE_LIMIT: 'off' });
const bare: Child = await startChild(bareModule);
const serviceUrl = `http://127.0.0.1:${service.ready.port}`;
const bareUrl = `http://127.0.0.1:${bare.ready.port}`;
const key = await signedUpWithKey(serviceUrl);
const auth = { authorization: `Bearer ${key}` };

const ours: Array<{ rate: number; cpu: number }> = [];
const baseline: Array<{ rate: number; cpu: number }> = [];
await requestsPerSecond(service, `${serviceUrl}/api/me`, auth); // warm-up: JIT, statement cache
for (let round = 0; round < 2; round++) {
  baseline.push(await requestsPerSecond(bare, `${bareUrl}/api/me`, {}));
  ours.push(await requestsPerSecond(service, `${serviceUrl}/api/me`, auth));
}
const bestOurs = Math.max(...ours.map((run) => run.rate));
const bestBaseline = Math.max(...baseline.map((run) => run.rate));
const runsLine = (runs: Array<{ rate: number; cpu: number }>) =>
  `${runs.map((run) => Math.round(run.rate)).join(', ')} req/s; server CPU µs per request ${runs.map((run) => run.cpu.toFixed(0)).join(', ')}`;
console.log(`  bare Fastify route:            ${runsLine(baseline)}`);
console.log(`  GET /api/me with an API key:   ${runsLine(ours)}`);
console.log(`  ${ratioLine('GET /api/me (API key)', bestOurs, bestBaseline, TARGET)}`);
await bare.stop();

// 50 concurrent sign-ins (real argon2id cost) while /healthz is asked one request at a time.
const healthz: number[] = [];
let burstDone = false;
const probe = (async () => {
  while (!burstDone) {
    const started = performance.now();
    const response = await fetch(`${serviceUrl}/healthz`);
    await response.text();
    healthz.push(performance.now() - started);
  }
})();
const burstStarted = performance.now();
const signIns = await Promise.all(
  Array.from({ length: 50 }, () => post(`${serviceUrl}/api/auth/login`, { email: 'bench@example.com', password: 'correct horse battery' }).then((r) => r.status)),
);
const burstMs = performance.now() - burstStarted;
burstDone = true;
await probe;
const p99 = percentile(healthz, 99);
const allSignedIn = signIns.every((status) => status === 200);
console.log(`  50 concurrent sign-ins took ${Math.round(burstMs)} ms (${allSignedIn ? 'all 200' : `statuses ${[...new Set(signIns)].join(',')}`});`);
console.log(`    /healthz meanwhile: ${healthz.length} requests, p50 ${percentile(healthz, 50).toFixed(1)} ms, p99 ${p99.toFixed(1)} ms (target ≤ 50) ${p99 <= 50 && allSignedIn ? 'PASS' : 'BELOW TARGET'}`);

// Sign-ins one at a time, alternating: the password alone, then the password and an authenticator-app code
// (a second request). Each account with the app signs in once: a code is accepted once, so one account
// could sign in only once per 30-second step.
const cookieOf = (response: Response, name: string) => response.headers.getSetCookie().find((cookie) => cookie.startsWith(`${name}=`))?.split(';')[0];
async function withTotp(index: number): Promise<{ email: string; secret: string }> {
  const email = `bench-totp-${index}@example.com`;
  const registered = await post(`${serviceUrl}/api/auth/register`, { email, password: 'correct horse battery', name: 'Bench' });
  const cookie = cookieOf(registered, 'session')!;
  const { secret } = (await (await post(`${serviceUrl}/api/me/totp`, {}, { cookie })).json()) as { secret: string };
  const confirmed = await post(`${serviceUrl}/api/me/totp/confirm`, { code: totpCodeAt(secret, Date.now()) }, { cookie });
  if (confirmed.status !== 200) throw new Error(`confirm: ${confirmed.status} ${await confirmed.text()}`);
  return { email, secret };
}
async function timedSignIn(email: string, secret?: string): Promise<{ ms: number; cpu: number }> {
  const cpuBefore = cpuMicros(service.process.pid);
  const started = performance.now();
  const password = await post(`${serviceUrl}/api/auth/login`, { email, password: 'correct horse battery' });
  let signedIn = password;
  if (secret !== undefined) {
    // The next step's code: the confirmation used this one's.
    signedIn = await post(`${serviceUrl}/api/auth/login/second-factor`, { code: totpCodeAt(secret, Date.now() + 30_000) }, { cookie: cookieOf(password, 'sign-in')! });
  }
  if (signedIn.status !== 200 || cookieOf(signedIn, 'session') === undefined) throw new Error(`sign-in: ${signedIn.status} ${await signedIn.text()}`);
  return { ms: performance.now() - started, cpu: cpuMicros(service.process.pid) - cpuBefore };
}
const SIGN_INS = 12;
const totpAccounts = [];
for (let i = 0; i < SIGN_INS; i++) totpAccounts.push(await withTotp(i));
const passwordOnly: Array<{ ms: number; cpu: number }> = [];
const twoSteps: Array<{ ms: number; cpu: number }> = [];
for (const account of totpAccounts) {
  passwordOnly.push(await timedSignIn('bench@example.com'));
  twoSteps.push(await timedSignIn(account.email, account.secret));
}
const median = (values: number[]) => percentile(values, 50);
const passwordMs = median(passwordOnly.map((run) => run.ms));
const twoStepMs = median(twoSteps.map((run) => run.ms));
console.log(`  sign-in, one at a time (${SIGN_INS} each, alternating): password alone p50 ${passwordMs.toFixed(1)} ms, server CPU ${(median(passwordOnly.map((run) => run.cpu)) / 1000).toFixed(1)} ms;`);
console.log(`    with an authenticator-app code p50 ${twoStepMs.toFixed(1)} ms, server CPU ${(median(twoSteps.map((run) => run.cpu)) / 1000).toFixed(1)} ms: ${(twoStepMs / passwordMs).toFixed(2)}× the password alone`);
await service.stop();
