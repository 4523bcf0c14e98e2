import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { insertHost } from '../../src/hosts/hosts.repository.ts';
import { newHostRow } from '../../src/hosts/hosts.service.ts';
import { LOCAL_HOST } from '../../src/providers/provider.ts';
import type { TestContext } from '../support/app.ts';
import { freshDatabase, urlWithSchema, type TestDatabase } from '../support/database.ts';
import { createMachineTestApp, newOwner, runningMachine, workerPass, type Owner } from '../support/machines.ts';

const run = promisify(execFile);

/**
 * `npm run hosts` as an operator runs it, a process of its own against the
 * service's database: bad input is refused with one line saying why, exit
 * code 2, and nothing recorded; `list --machines` shows each host's machines.
 * (Adding a real engine, draining and moving: placement and move tests.)
 */
describe('npm run hosts: what an operator is refused, and what list shows', () => {
  let database: TestDatabase;
  let ctx: TestContext;
  let owner: Owner;
  let notDocker: http.Server;

  before(async () => {
    database = await freshDatabase(join(await mkdtemp(join(tmpdir(), 'hosts-cli-')), 'service.db'));
    ctx = await createMachineTestApp({ database });
    owner = await newOwner(ctx);
    await insertHost(ctx.app.deps.db, { ...newHostRow(LOCAL_HOST, 'unix:///var/run/docker.sock', ctx.clock.now()), cpus: 2, memory_bytes: 2 * 1024 ** 3 });
    // Something that answers HTTP, but not as a Docker engine does.
    notDocker = http.createServer((_request, response) => response.end('hello from a web server'));
    await new Promise<void>((resolve) => notDocker.listen(0, '127.0.0.1', resolve));
  });
  after(async () => {
    notDocker?.close();
    await ctx?.close();
    await database?.drop();
  });

  const hosts = (...args: string[]) => run(process.execPath, ['scripts/hosts.ts', ...args], { env: { ...process.env, DATABASE_URL: urlWithSchema(database) } });
  const refused = (...args: string[]) =>
    hosts(...args).then(
      ({ stdout }) => assert.fail(`not refused: ${stdout}`),
      (error: { code: number; stdout: string; stderr: string }) => error,
    );
  const hostNames = async () => (await ctx.app.deps.db.selectFrom('hosts').select('name').orderBy('name').execute()).map((row) => row.name);

  test('add: an address out of reach, one that is not a Docker engine, a bad name or address are refused in one line each; nothing is recorded', async () => {
    const port = (notDocker.address() as AddressInfo).port;
    const cases: Array<[string[], RegExp]> = [
      [['add', 'gone', 'unix:///nowhere/docker.sock'], /^cannot use the engine at unix:\/\/\/nowhere\/docker\.sock: .+\n$/],
      [['add', 'web', `tcp://127.0.0.1:${port}`], new RegExp(`^cannot use the engine at tcp://127\\.0\\.0\\.1:${port}: it answered, but not as a Docker engine does\\n$`)],
      [['add', 'Bad_Name', 'unix:///var/run/docker.sock'], /^"Bad_Name" is not a host name: .+\n$/],
      [['add', 'ftp-host', 'ftp://example.com'], /^the address ftp:\/\/example\.com .+\n$/],
      [['add', LOCAL_HOST, 'unix:///var/run/docker.sock'], /^a host named local exists already\n$/],
    ];
    for (const [args, message] of cases) {
      const answer = await refused(...args);
      assert.equal(answer.code, 2, args.join(' '));
      assert.equal(answer.stdout, '', args.join(' '));
      assert.match(answer.stderr, message, args.join(' '));
    }
    assert.deepEqual(await hostNames(), [LOCAL_HOST]);
  });

  test('list --machines shows each host with its machines; remove of a host holding machines is refused naming how many, then works once they are gone', async () => {
    const machine = await runningMachine(ctx, owner, { name: 'on-local' });
    const listed = await hosts('list', '--machines');
    assert.match(listed.stdout, /^local\s+active\s+cpus 1\/\d+\s+memory [\d.]+\/2\.0 GiB\s+machines 1 /m);
    assert.match(listed.stdout, new RegExp(`^  ${machine.id}  running\\s+small\\s+account ${owner.user.id}$`, 'm'));
    assert.doesNotMatch((await hosts('list')).stdout, new RegExp(machine.id), 'without --machines, hosts only');

    const holding = await refused('remove', LOCAL_HOST);
    assert.equal(holding.code, 2);
    assert.equal(holding.stderr, 'the host local still holds 1 machine: drain it and move or destroy them first\n');
    assert.deepEqual(await hostNames(), [LOCAL_HOST]);

    assert.equal((await owner.call('DELETE', `/api/machines/${machine.id}`)).statusCode, 200);
    await workerPass(ctx);
    await hosts('remove', LOCAL_HOST);
    assert.deepEqual(await hostNames(), []);
  });
});
