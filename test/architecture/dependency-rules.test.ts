import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DEPCRUISE = join(ROOT, 'node_modules/.bin/depcruise');

/** Runs dependency-cruiser with one of the project's configs over a tree of files; answers its exit code and report. */
async function cruise(files: Record<string, string>, config: string): Promise<{ code: number; report: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'depcruise-'));
  await writeFile(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { module: 'nodenext', allowImportingTsExtensions: true, noEmit: true } }));
  for (const [path, text] of Object.entries(files)) {
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), text);
  }
  return new Promise((resolve) => {
    execFile(DEPCRUISE, ['src', '--config', join(ROOT, config)], { cwd: dir }, (error, stdout, stderr) => {
      resolve({ code: typeof error?.code === 'number' ? error.code : 0, report: stdout + stderr });
    });
  });
}

test('the dependency rules catch a folder cycle, a base layer that imports a domain, and a private file used from another domain', async () => {
  const files = {
    'src/jobs/queue.ts': "import type { Machine } from '../machines/machines.repository.ts';\nexport type Q = Machine;\n",
    'src/machines/machines.repository.ts': "import type { Q } from '../jobs/queue.ts';\nexport type Machine = { q?: Q };\n",
    'src/events/envelope.ts': "import type { Row } from '../event-webhooks/deliveries.repository.ts';\nexport type E = Row;\n",
    'src/event-webhooks/deliveries.repository.ts': 'export type Row = { id: string };\n',
  };
  const modules = await cruise(files, '.dependency-cruiser.cjs');
  assert.notEqual(modules.code, 0, modules.report);
  assert.match(modules.report, /base-layers-import-no-domain: src\/jobs\/queue\.ts → src\/machines\/machines\.repository\.ts/);
  assert.match(modules.report, /event-webhooks-used-through-its-public-files: src\/events\/envelope\.ts → src\/event-webhooks\/deliveries\.repository\.ts/);
  assert.match(modules.report, /no-module-cycles/);
  const folders = await cruise(files, '.dependency-cruiser.folders.cjs');
  assert.notEqual(folders.code, 0, folders.report);
  assert.match(folders.report, /no-folder-cycles: src\/(jobs|machines) →/);
});

test('a tree that keeps the rules passes them', async () => {
  const files = {
    'src/jobs/queue.ts': 'export type Q = { id: string };\n',
    'src/machines/machines.repository.ts': "import type { Q } from '../jobs/queue.ts';\nexport type Machine = { q?: Q };\n",
    'src/event-webhooks/outbox.ts': "import type { Machine } from '../machines/machines.plugin.ts';\nexport type O = Machine;\n",
    'src/machines/machines.plugin.ts': "import type { Machine as M } from './machines.repository.ts';\nexport type Machine = M;\n",
  };
  for (const config of ['.dependency-cruiser.cjs', '.dependency-cruiser.folders.cjs']) {
    const result = await cruise(files, config);
    assert.equal(result.code, 0, result.report);
  }
});

test('the machine rooms build on each other in one order: a later room uses any file of an earlier one, never the reverse', async () => {
  const files = {
    'src/providers/provider.ts': 'export type P = { id: string };\n',
    'src/machines/machines.repository.ts': "import type { P } from '../providers/provider.ts';\nexport type Machine = { p?: P };\n",
    'src/runs/runs.service.ts': "import type { Machine } from '../machines/machines.repository.ts';\nexport type Run = { m?: Machine };\n",
    'src/machine-access/terminals.service.ts': "import type { Run } from '../runs/runs.service.ts';\nimport type { P } from '../providers/provider.ts';\nexport type T = { r?: Run; p?: P };\n",
  };
  const allowed = await cruise(files, '.dependency-cruiser.cjs');
  assert.equal(allowed.code, 0, allowed.report);

  const backwards = { ...files, 'src/machines/machine-transitions.ts': "import type { Run } from '../runs/runs.service.ts';\nexport type X = Run;\n" };
  const refused = await cruise(backwards, '.dependency-cruiser.cjs');
  assert.notEqual(refused.code, 0, refused.report);
  assert.match(refused.report, /machines-imports-no-later-room: src\/machines\/machine-transitions\.ts → src\/runs\/runs\.service\.ts/);
  // Other domains still use a room only through its public files.
  const outsider = { ...files, 'src/billing/metering.ts': "import type { Run } from '../runs/runs.service.ts';\nexport type X = Run;\n" };
  const outside = await cruise(outsider, '.dependency-cruiser.cjs');
  assert.match(outside.report, /runs-used-through-its-public-files: src\/billing\/metering\.ts → src\/runs\/runs\.service\.ts/);
});
