import { strict as assert } from 'node:assert';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { createApiKey, createTestApp, registerUser, type TestAppOptions, type TestContext } from '../support/app.ts';
import { DOCKER_TEST_ENV, dockerUnavailable, removeMachineContainers } from '../support/docker.ts';
import { eventually } from '../support/receiver.ts';
import { freePort } from '../support/service-process.ts';
import { brokenLinks, documentPaths, githubSlug, parsePage, type CodeBlock } from './markdown.ts';

/**
 * The README and docs/ are what a newcomer reads first: every link in them must lead somewhere, and every
 * shell sample must work as written. A fence `sh` (or `bash`) is a sample this test runs against a started
 * service, with `$BASE`, `$KEY`, `$MACHINE` and `$ENDPOINT` set as the pages say; `sh docker` needs a machine
 * that really runs commands and runs on the Docker provider. What is not meant to run here (starting the
 * service, a host's backup, a proxy's configuration, an answer) takes another fence: `console`, `nginx`,
 * `json`, `text`.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PAGES = documentPaths(ROOT);
const RUNNABLE = new Set(['sh', 'bash', 'shell', 'zsh']);
const SAMPLE_TIMEOUT_MS = 120_000;

async function allBlocks(): Promise<CodeBlock[]> {
  const pages = await Promise.all(PAGES.map(async (page) => parsePage(page, await readFile(join(ROOT, page), 'utf8'))));
  return pages.flatMap((page) => page.blocks);
}

const runnable = (block: CodeBlock) => RUNNABLE.has(block.info[0] ?? '');
const needsDocker = (block: CodeBlock) => block.info.includes('docker');
const named = (block: CodeBlock) => `${block.page}:${block.line}`;

describe('links', () => {
  test('GitHub anchors are made the way GitHub makes them', () => {
    assert.equal(githubSlug('OAuth for `/api/mcp` (hosted connectors)'), 'oauth-for-apimcp-hosted-connectors');
    assert.equal(githubSlug("Billing's meter and ledger"), 'billings-meter-and-ledger');
    assert.equal(githubSlug('When things go wrong: history, recovery, auto-disable, retention'), 'when-things-go-wrong-history-recovery-auto-disable-retention');
    const page = parsePage('x.md', '# A\n\n```sh\n# not a heading\n```\n\n## A\n\n[ok](#a-1) [`code`](#not-a-heading) `[in code](#nowhere)`\n');
    assert.deepEqual([...page.anchors], ['a', 'a-1']);
    assert.deepEqual(page.links.map((link) => link.target), ['#a-1', '#not-a-heading']);
  });

  test('a link to a missing file or heading is reported with its place', () => {
    const pages: Record<string, string> = { 'README.md': '# Top\n\n[a](docs/a.md#there) [b](docs/a.md#elsewhere) [c](docs/none.md) [d](#top) [e](https://example.com/x)\n', 'docs/a.md': '# There\n' };
    assert.deepEqual(brokenLinks(ROOT, ['README.md'], { read: (path) => pages[path]!, exists: (path) => path in pages }), [
      'README.md:3: docs/a.md#elsewhere (no heading #elsewhere in docs/a.md)',
      'README.md:3: docs/none.md (no file docs/none.md)',
    ]);
  });

  test('every relative link in the README and docs/ leads to a file, and every anchor to a heading', () => {
    assert.deepEqual(brokenLinks(ROOT, PAGES), []);
  });

  test('no page cites a document the reader does not have ("CONTRACT n", "Spec x.y")', async () => {
    for (const page of PAGES) {
      const lines = (await readFile(join(ROOT, page), 'utf8')).split('\n');
      const cited = lines.flatMap((line, index) => (/CONTRACT|\bSpec [0-9]/.test(line) ? [`${page}:${index + 1}: ${line.trim()}`] : []));
      assert.deepEqual(cited, []);
    }
  });

  test('the README stays a front door: at most 250 lines', async () => {
    const lines = (await readFile(join(ROOT, 'README.md'), 'utf8')).trimEnd().split('\n').length;
    assert.ok(lines <= 250, `README.md has ${lines} lines`);
  });
});

describe('samples', () => {
  test('the README and the api, webhooks, machines and operations pages have samples that run, and every curl in them fails on an error status', async () => {
    const blocks = (await allBlocks()).filter(runnable);
    for (const page of ['README.md', 'docs/api.md', 'docs/webhooks.md', 'docs/machines.md', 'docs/operations.md']) {
      assert.ok(blocks.some((block) => block.page === page), `${page} has no sh sample`);
    }
    for (const block of blocks) {
      const commands = block.code.split('\n').filter((line) => !line.trimStart().startsWith('#'));
      for (const line of commands.filter((text) => /(^|[\s|$(])curl\s/.test(text))) {
        assert.match(line, /curl\s+(-[a-zA-Z]*f|--fail)/, `${named(block)}: curl without -f (an error status would pass unseen): ${line.trim()}`);
      }
    }
  });
});

/** Runs one sample with bash, as a reader would paste it, strict about failures; resolves with what it printed. */
function runSample(block: CodeBlock, env: Record<string, string>, cwd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', `set -euo pipefail\n${block.code}`], { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), SAMPLE_TIMEOUT_MS);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(output);
      else reject(new Error(`${named(block)} ended with ${signal ?? `exit code ${code}`}:\n${block.code}\n--- its output:\n${output}`));
    });
  });
}

/**
 * What a sample's answers must say beyond a 2xx: an MCP tool that failed still answers 200 (`isError`), and
 * the README's first machine must really have run its command.
 */
function checkOutput(block: CodeBlock, output: string, provider: 'simulated' | 'docker'): void {
  assert.doesNotMatch(output, /\\?"isError\\?":\s*true/, `${named(block)}: an MCP tool answered an error`);
  if (block.page === 'README.md' && block.code.includes('first-machine')) {
    assert.match(output, /"status": "succeeded",\s*"exitCode": 0/, `${named(block)}: the first run did not succeed`);
    if (provider === 'docker') assert.match(output, /hello from mch-/, `${named(block)}: the first run printed nothing of its own`);
  }
  if (block.page === 'README.md' && block.code.includes('machine_run_command')) {
    assert.match(output, /\\"status\\":\\"succeeded\\"/, `${named(block)}: machine_run_command did not run its command`);
  }
}

interface StartedService {
  ctx: TestContext;
  env: Record<string, string>;
  cwd: string;
}

/** The app listening on a port of its own (samples are curl commands), an account with a key, a running machine, an endpoint. */
async function startService(options: TestAppOptions, machineTimeoutMs: number): Promise<StartedService> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const ctx = await createTestApp({ ...options, realClock: true, env: { PUBLIC_URL: base, PREVIEW_URL: `http://{port}-{id}.localhost:${port}`, WEBHOOK_TIMEOUT_MS: '2000', ...options.env } });
  await ctx.app.listen({ port, host: '127.0.0.1' });
  const user = await registerUser(ctx);
  const key = await createApiKey(ctx, user);
  const call = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const json = (await response.json()) as Record<string, unknown>;
    if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(json)}`);
    return json;
  };
  const machine = await call('POST', '/api/machines', { name: 'docs-samples' });
  const booted = await eventually(async () => {
    const current = await call('GET', `/api/machines/${String(machine.id)}`);
    return current.status === 'starting' ? undefined : current;
  }, machineTimeoutMs, 'the samples machine booted');
  if (booted.status !== 'running') {
    const events = await call('GET', `/api/events?machineId=${String(machine.id)}`);
    assert.fail(`the samples machine did not boot: ${JSON.stringify(booted)}; its events: ${JSON.stringify(events.data)}`);
  }
  const endpoint = await call('POST', '/api/event-webhooks', { url: 'https://receiver.invalid/hooks/docs', events: ['*'] });
  const cwd = await mkdtemp(join(tmpdir(), 'docs-samples-'));
  return { ctx, cwd, env: { BASE: base, KEY: key, MACHINE: String(machine.id), ENDPOINT: String(endpoint.id) } };
}

async function stopService(service: StartedService | undefined, removeContainers: boolean): Promise<void> {
  if (!service) return;
  const machines = removeContainers ? await service.ctx.app.deps.db.selectFrom('machines').select('id').execute() : [];
  await service.ctx.close();
  await rm(service.cwd, { recursive: true, force: true });
  if (removeContainers) await removeMachineContainers(machines.map((machine) => machine.id));
}

function requireTools(): void {
  for (const tool of ['bash', 'curl', 'jq', 'openssl']) {
    try {
      execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' });
    } catch {
      throw new Error(`the documentation's samples need ${tool} on the PATH`);
    }
  }
}

const blocks = await allBlocks();

describe('samples on the simulated provider', () => {
  let service: StartedService | undefined;
  before(async () => {
    requireTools();
    // The images sample names these; on the simulated provider they need no engine.
    service = await startService({ env: { MACHINE_BOOT_MS: '200', MACHINE_IMAGES: 'python=python:3.13-slim,node=node:24' } }, 10_000);
  });
  after(() => stopService(service, false));

  for (const block of blocks.filter((candidate) => runnable(candidate) && !needsDocker(candidate))) {
    test(named(block), async (t) => {
      const output = await runSample(block, service!.env, service!.cwd);
      t.diagnostic(output);
      checkOutput(block, output, 'simulated');
    });
  }
});

const dockerSkip = await dockerUnavailable();

describe('samples on the Docker provider', { skip: dockerSkip }, () => {
  let service: StartedService | undefined;
  before(async () => {
    requireTools();
    service = await startService({ env: { MACHINE_PROVIDER: 'docker', ...DOCKER_TEST_ENV } }, 180_000);
  });
  after(() => stopService(service, true));

  // The README's first machine really runs its command here; then every sample that needs a real machine.
  for (const block of blocks.filter((candidate) => runnable(candidate) && (needsDocker(candidate) || candidate.page === 'README.md'))) {
    test(named(block), async (t) => {
      const output = await runSample(block, service!.env, service!.cwd);
      t.diagnostic(output);
      checkOutput(block, output, 'docker');
    });
  }
});
