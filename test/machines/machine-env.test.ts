import { strict as assert } from 'node:assert';
import { mkdtemp, readdir, readFile, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { loadConfig } from '../../src/config.ts';
import { containerSpec } from '../../src/providers/docker/container-spec.ts';
import { createSealer, loadSecretsKey } from '../../src/shared/sealing.ts';
import { machineSuite } from '../support/machines.ts';
import { assertProblem } from '../support/problem.ts';

/**
 * A machine's environment (issue 41) at the API: checked at create, kept
 * sealed, shown only by its names. That it reaches commands: docker-env.test.ts.
 */
describe('a machine’s environment', () => {
  const suite = machineSuite();

  const machineCount = async () => (await suite.ctx.app.deps.db.selectFrom('machines').select('id').execute()).length;

  test('bad env is refused with 400 problem+json and nothing is created', async () => {
    const tooMany = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`V${i}`, 'x']));
    const cases: Array<[string, unknown]> = [
      ['a name starting with a digit', { '1ABC': 'x' }],
      ['a name with a dash', { 'MY-VAR': 'x' }],
      ['a name with an equals sign', { 'A=B': 'x' }],
      ['an empty name', { '': 'x' }],
      ['a 65th variable', tooMany],
      ['a value over 32 KiB', { BIG: 'x'.repeat(32 * 1024 + 1) }],
      ['a value over 32 KiB in UTF-8 bytes', { BIG: 'é'.repeat(16 * 1024 + 1) }],
      ['a value that is not a string', { N: 5 }],
      ['a NUL in a value', { N: 'a\u0000b' }],
      ['an array', ['A=b']],
    ];
    const before = await machineCount();
    for (const [what, env] of cases) {
      const response = await suite.owner.call('POST', '/api/machines', { name: 'bad-env', env });
      assert.equal(response.statusCode, 400, `${what}: ${response.body}`);
      assertProblem(response, 400, 'invalid_request');
      assert.ok(!response.body.includes('x'.repeat(100)), `${what}: the answer echoes the value`);
    }
    assert.equal(await machineCount(), before);
  });

  test('64 variables and a value of exactly 32 KiB are taken; answers and the database show only the names', async () => {
    const env = Object.fromEntries(Array.from({ length: 63 }, (_, i) => [`V_${i}`, `value-${i}`]));
    env._BIG = 'y'.repeat(32 * 1024);
    const created = await suite.owner.call('POST', '/api/machines', { name: 'env-ok', env });
    assert.equal(created.statusCode, 201, created.body);
    const machine = created.json();
    assert.deepEqual(machine.envNames, Object.keys(env));
    const fetched = await suite.owner.call('GET', `/api/machines/${machine.id}`);
    assert.deepEqual(fetched.json().envNames, Object.keys(env));
    for (const body of [created.body, fetched.body, (await suite.owner.call('GET', '/api/machines')).body]) {
      assert.ok(!body.includes('value-1') && !body.includes('yyyy'), 'an answer holds a value');
    }
    const row = await suite.ctx.app.deps.db.selectFrom('machines').selectAll().where('id', '=', machine.id).executeTakeFirstOrThrow();
    assert.ok(!JSON.stringify(row).includes('value-1'), 'the row holds a value in clear');
    assert.deepEqual(JSON.parse(suite.ctx.app.deps.secrets.open(row.env_sealed!)), env);
    const plain = await suite.owner.call('POST', '/api/machines', { name: 'no-env' });
    assert.deepEqual(plain.json().envNames, []);
  });

  test('env cannot be given to a machine taken from a pool', async () => {
    const response = await suite.owner.call('POST', '/api/machines', { name: 'pooled', pool: 'nope', env: { A: 'b' } });
    assertProblem(response, 400, 'invalid_request');
  });
});

describe('the secrets key', () => {
  test('SECRETS_KEY is taken in base64 or hex and a bad one is refused without echoing it', () => {
    const key = Buffer.alloc(32, 7);
    assert.deepEqual(loadSecretsKey(loadConfig({ SECRETS_KEY: key.toString('base64') }).secrets), key);
    assert.deepEqual(loadSecretsKey(loadConfig({ SECRETS_KEY: key.toString('hex') }).secrets), key);
    for (const bad of ['short', Buffer.alloc(31).toString('base64'), 'z'.repeat(64)]) {
      assert.throws(() => loadConfig({ SECRETS_KEY: bad }), (error: Error) => error.message.startsWith('SECRETS_KEY must be 32 bytes') && !error.message.includes(bad));
    }
  });

  test('without SECRETS_KEY a key is generated beside the SQLite database, 0600, and the same one read again', async () => {
    const folder = await mkdtemp(join(tmpdir(), 'secrets-'));
    const config = loadConfig({ DATABASE_URL: `sqlite:${join(folder, 'service.db')}` }).secrets;
    assert.equal(config.keyFile, join(folder, 'secrets.key'));
    const first = loadSecretsKey(config);
    assert.equal((await stat(config.keyFile!)).mode & 0o777, 0o600);
    assert.deepEqual(loadSecretsKey(config), first);
    assert.deepEqual(await readdir(folder), ['secrets.key'], 'no draft left behind');
    assert.equal(Buffer.from((await readFile(config.keyFile!, 'utf8')).trim(), 'base64').length, 32);
    const sealed = createSealer(first).seal('hello');
    assert.equal(createSealer(loadSecretsKey(config)).open(sealed), 'hello');
    assert.throws(() => createSealer(Buffer.alloc(32, 1)).open(sealed));
    assert.equal(loadConfig({ DATABASE_URL: 'sqlite::memory:' }).secrets.keyFile, null);
  });
});

describe('images the operator offers', () => {
  const suite = machineSuite({ env: { MACHINE_IMAGES: 'python=python:3.13-slim, node=node:24' } });

  test('GET /api/images lists the base image first, then MACHINE_IMAGES in order', async () => {
    const response = await suite.owner.call('GET', '/api/images');
    assert.equal(response.statusCode, 200);
    assert.deepEqual(response.json(), { data: [{ name: 'default', default: true }, { name: 'python', default: false }, { name: 'node', default: false }] });
  });

  test('a machine remembers the image it was created from; an unknown name is a 400 and creates nothing', async () => {
    const created = await suite.owner.call('POST', '/api/machines', { name: 'py', image: 'python' });
    assert.equal(created.statusCode, 201, created.body);
    assert.equal(created.json().image, 'python');
    assert.equal((await suite.owner.call('GET', `/api/machines/${created.json().id}`)).json().image, 'python');
    assert.equal((await suite.owner.call('POST', '/api/machines', { name: 'plain' })).json().image, 'default');
    const count = (await suite.ctx.app.deps.db.selectFrom('machines').select('id').execute()).length;
    for (const image of ['ruby', 'python:3.13-slim', '']) {
      const response = await suite.owner.call('POST', '/api/machines', { name: 'nope', image });
      assertProblem(response, 400, 'invalid_request');
    }
    assert.match((await suite.owner.call('POST', '/api/machines', { name: 'nope', image: 'ruby' })).json().detail, /image must be one of default, python, node/);
    assertProblem(await suite.owner.call('POST', '/api/machines', { name: 'pooled', pool: 'x', image: 'python' }), 400, 'invalid_request');
    assert.equal((await suite.ctx.app.deps.db.selectFrom('machines').select('id').execute()).length, count);
  });

  test('MACHINE_IMAGES is checked at start-up', () => {
    for (const bad of ['python', 'Python=x', 'default=x', 'a=x,a=y', 'a=']) {
      assert.throws(() => loadConfig({ MACHINE_IMAGES: bad }), /^ConfigError: MACHINE_IMAGES/);
    }
    assert.deepEqual(loadConfig({ MACHINE_IMAGES: 'a=x:1,b-2=reg.example/y@sha256:abc' }).machines.images, { a: 'x:1', 'b-2': 'reg.example/y@sha256:abc' });
  });
});

describe('the container of a machine with an environment', () => {
  test('the platform’s variables win over the creator’s, one entry a name', () => {
    const size = Object.values(loadConfig({}).machines.sizes)[0]!;
    const spec = containerSpec(
      { id: 'mch_x', name: 'x', size: 'small', labels: {}, status: 'starting', statusChangedAt: 0, screen: { width: 800, height: 600 } },
      { image: 'img', size, network: 'n', nameserver: '10.0.0.1', limitDisk: false, env: { DISPLAY: ':9', MACHINE_NAMESERVER: 'x', TOKEN: 'a=b' } },
    );
    assert.deepEqual(spec.Env, ['DISPLAY=:1', 'MACHINE_NAMESERVER=10.0.0.1', 'TOKEN=a=b', 'MACHINE_SCREEN=800x600']);
  });
});
