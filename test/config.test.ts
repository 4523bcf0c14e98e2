import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import { ConfigError, DEFAULT_MACHINE_IMAGE, DEFAULT_PASSWORD_HASH_COST, loadConfig } from '../src/config.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Asserts that loading `env` stops with one ConfigError line that starts with the variable's name. */
function assertRejects(env: Record<string, string>, variable: string): void {
  assert.throws(
    () => loadConfig(env),
    (error: unknown) => {
      assert.ok(error instanceof ConfigError, `${JSON.stringify(env)} threw ${String(error)}`);
      assert.ok(error.message.startsWith(`${variable} `), `"${error.message}" names ${variable}`);
      assert.doesNotMatch(error.message, /\n/);
      return true;
    },
    `${JSON.stringify(env)} is refused`,
  );
}

describe('loadConfig', () => {
  test('defaults (CONTRACT 2)', () => {
    const config = loadConfig({});
    assert.deepEqual(config, {
      port: 3000,
      host: '127.0.0.1',
      publicUrl: 'http://localhost:3000',
      previewUrl: 'http://{port}-{id}.localhost:3000',
      secureCookies: false,
      databaseUrl: 'sqlite:./data/service.db',
      smtpUrl: null,
      mailDir: resolve('./data/mail'),
      role: 'all',
      secrets: { key: null, keyFile: resolve('./data/secrets.key') },
      trustProxy: false,
      rateLimit: true,
      logLevel: 'info',
      webhook: {
        timeoutMs: 10_000,
        retryDelaysMs: [30_000, 60_000, 120_000, 240_000, 480_000, 960_000, 1_920_000, 3_600_000],
        maxAttempts: 8,
        allowPrivateTargets: false,
        disableAfterMs: 5 * 86_400_000,
      },
      retention: { periodMs: 30 * 86_400_000 },
      machines: {
        provider: 'auto',
        bootMs: 2000,
        sizes: {
          small: { cpus: 1, memoryBytes: 1024 ** 3, pids: 512, diskBytes: 10 * 1024 ** 3 },
          medium: { cpus: 2, memoryBytes: 2 * 1024 ** 3, pids: 1024, diskBytes: 20 * 1024 ** 3 },
          large: { cpus: 4, memoryBytes: 4 * 1024 ** 3, pids: 2048, diskBytes: 40 * 1024 ** 3 },
        },
        image: DEFAULT_MACHINE_IMAGE,
        images: {},
        egress: true,
        dnsServers: [],
        autoStopMinutes: 15,
        privateAllow: [],
        hosts: [],
        hostCertsDir: null,
        hostLostAfterMs: 30_000,
        cpuOvercommit: 4,
      },
      jobs: { pollIntervalMs: 1000 },
      billing: {
        enabled: true,
        pricesMicrosPerHour: { small: 50_000, medium: 100_000, large: 200_000 },
        pausedPricesMicrosPerHour: { small: 5_000, medium: 10_000, large: 20_000 },
        meteringIntervalMs: 60_000,
        welcomeCreditMicros: 10_000_000,
        lowBalanceMicros: 1_000_000,
        paymentProvider: 'simulated',
      },
      mcp: { toolCallsPerMinute: 600 },
      performance: { pgPreparedStatements: true, webhookSenderThread: true },
      passwordHashCost: DEFAULT_PASSWORD_HASH_COST,
    });
    assert.deepEqual(DEFAULT_PASSWORD_HASH_COST, { memoryKiB: 19 * 1024, passes: 2, parallelism: 1 });
  });

  test('MACHINE_PROVIDER, MACHINE_BOOT_MS, and JOBS_POLL_INTERVAL_MS (formerly MACHINE_WORKER_INTERVAL_MS, still read)', () => {
    const config = loadConfig({ MACHINE_PROVIDER: 'simulated', MACHINE_BOOT_MS: '50', JOBS_POLL_INTERVAL_MS: '25' });
    assert.deepEqual({ provider: config.machines.provider, bootMs: config.machines.bootMs }, { provider: 'simulated', bootMs: 50 });
    assert.deepEqual(config.jobs, { pollIntervalMs: 25 });
    // auto, the default: Docker where an engine answers at start-up, else simulated (machines/provider-choice.ts).
    for (const value of ['auto', '', undefined]) assert.equal(loadConfig(value === undefined ? {} : { MACHINE_PROVIDER: value }).machines.provider, 'auto', `MACHINE_PROVIDER=${value}`);
    assert.equal(loadConfig({ MACHINE_PROVIDER: 'docker' }).machines.provider, 'docker');
    assert.deepEqual(loadConfig({ MACHINE_WORKER_INTERVAL_MS: '40' }).jobs, { pollIntervalMs: 40 });
    assert.deepEqual(loadConfig({ MACHINE_WORKER_INTERVAL_MS: '40', JOBS_POLL_INTERVAL_MS: '30' }).jobs, { pollIntervalMs: 30 }, 'the new name wins');
    for (const [variable, value] of [['MACHINE_PROVIDER', 'firecracker'], ['MACHINE_PROVIDER', 'Auto'], ['MACHINE_BOOT_MS', '-1'], ['MACHINE_BOOT_MS', 'soon'], ['MACHINE_WORKER_INTERVAL_MS', '5'], ['JOBS_POLL_INTERVAL_MS', '5']]) {
      assert.throws(() => loadConfig({ [variable!]: value }), (error: unknown) => error instanceof ConfigError && error.message.startsWith(`${variable} `), `${variable}=${value}`);
    }
  });

  test('real machines (CONTRACT 15): MACHINE_PROVIDER=docker, MACHINE_IMAGE, MACHINE_SIZES (priced by MACHINE_PRICES, exactly), MACHINE_EGRESS', () => {
    const config = loadConfig({ MACHINE_PROVIDER: 'docker', MACHINE_IMAGE: 'debian:bookworm', MACHINE_EGRESS: 'off', MACHINE_SIZES: 'tiny=0.5/256m/64/1g, big=8/16g/4096', MACHINE_PRICES: 'tiny=0.01,big=1.00' });
    assert.equal(config.machines.provider, 'docker');
    assert.equal(config.machines.image, 'debian:bookworm');
    assert.equal(config.machines.egress, false);
    assert.deepEqual(config.machines.sizes, {
      tiny: { cpus: 0.5, memoryBytes: 256 * 1024 ** 2, pids: 64, diskBytes: 1024 ** 3 },
      big: { cpus: 8, memoryBytes: 16 * 1024 ** 3, pids: 4096, diskBytes: 10 * 1024 ** 3 },
    });
    assert.deepEqual(config.billing.pricesMicrosPerHour, { tiny: 10_000, big: 1_000_000 });
    assert.deepEqual(config.machines.dnsServers, []);
    assert.deepEqual(loadConfig({ MACHINE_DNS_SERVERS: ' 10.0.0.2, 1.1.1.1' }).machines.dnsServers, ['10.0.0.2', '1.1.1.1']);
    assert.match(DEFAULT_MACHINE_IMAGE, /^machine-platform\/base:\d+\.\d+\.\d+/);
    assert.equal(loadConfig({ MACHINE_AUTO_STOP_MINUTES: '0' }).machines.autoStopMinutes, 0);
    assert.equal(loadConfig({ MACHINE_AUTO_STOP_MINUTES: '10080' }).machines.autoStopMinutes, 10_080);
    for (const bad of ['-1', '10081', '1.5', 'never']) assert.throws(() => loadConfig({ MACHINE_AUTO_STOP_MINUTES: bad }), /MACHINE_AUTO_STOP_MINUTES/);
    const refused: Array<[Record<string, string>, string]> = [
      [{ MACHINE_SIZES: 'small=1/1g' }, 'MACHINE_SIZES'],
      [{ MACHINE_SIZES: 'small=0/1g/512' }, 'MACHINE_SIZES'],
      [{ MACHINE_SIZES: 'small=1/1t/512' }, 'MACHINE_SIZES'],
      [{ MACHINE_SIZES: 'small=1/1g/8' }, 'MACHINE_SIZES'],
      [{ MACHINE_SIZES: 'small=1/1g/512/100m' }, 'MACHINE_SIZES'],
      [{ MACHINE_SIZES: 'small=1/1g/512/17t' }, 'MACHINE_SIZES'],
      [{ MACHINE_SIZES: 'small=1/1g/512/10' }, 'MACHINE_SIZES'],
      [{ MACHINE_DNS_SERVERS: '10.0.0.2,resolver.internal' }, 'MACHINE_DNS_SERVERS'],
      [{ MACHINE_DNS_SERVERS: '::1' }, 'MACHINE_DNS_SERVERS'],
      [{ MACHINE_SIZES: 'small=1/1g/512,small=2/2g/512' }, 'MACHINE_SIZES'],
      [{ MACHINE_SIZES: 'tiny=1/1g/512' }, 'MACHINE_PRICES'],
      [{ MACHINE_SIZES: 'tiny=1/1g/512', MACHINE_PRICES: 'tiny=0.01,small=0.05' }, 'MACHINE_PRICES'],
      [{ MACHINE_SIZES: 'tiny=1/1g/512,huge=2/2g/512', MACHINE_PRICES: 'tiny=0.01' }, 'MACHINE_PRICES'],
      [{ MACHINE_EGRESS: 'sometimes' }, 'MACHINE_EGRESS'],
      [{ MACHINE_IMAGE: ' ' }, 'MACHINE_IMAGE'],
    ];
    for (const [env, variable] of refused) assertRejects(env, variable);
  });

  test('MCP_TOOL_CALLS_PER_MINUTE: 600 by default, a whole number from 1', () => {
    assert.deepEqual(loadConfig({ MCP_TOOL_CALLS_PER_MINUTE: '30' }).mcp, { toolCallsPerMinute: 30 });
    for (const value of ['0', 'many', '-5']) {
      assert.throws(() => loadConfig({ MCP_TOOL_CALLS_PER_MINUTE: value }), (error: unknown) => error instanceof ConfigError && error.message.startsWith('MCP_TOOL_CALLS_PER_MINUTE '), value);
    }
  });

  test('the speed options PG_PREPARED_STATEMENTS and WEBHOOK_SENDER_THREAD: each a switch', () => {
    assert.deepEqual(loadConfig({ PG_PREPARED_STATEMENTS: 'off', WEBHOOK_SENDER_THREAD: 'off' }).performance, {
      pgPreparedStatements: false,
      webhookSenderThread: false,
    });
    const postgres = 'postgres://postgres@127.0.0.1:5432/test';
    assert.equal(loadConfig({ DATABASE_URL: 'sqlite::memory:' }).performance.webhookSenderThread, true, 'on by default with SQLite');
    assert.equal(loadConfig({ DATABASE_URL: postgres }).performance.webhookSenderThread, false, 'off by default with PostgreSQL');
    assert.equal(loadConfig({ DATABASE_URL: postgres, WEBHOOK_SENDER_THREAD: 'on' }).performance.webhookSenderThread, true);
    assert.equal(loadConfig({ DATABASE_URL: postgres }).performance.pgPreparedStatements, true, 'prepared statements are on by default');
    for (const variable of ['PG_PREPARED_STATEMENTS', 'WEBHOOK_SENDER_THREAD']) {
      assert.throws(() => loadConfig({ [variable]: 'fast' }), (error: unknown) => error instanceof ConfigError && error.message.startsWith(`${variable} `));
    }
  });

  test('BILLING, MACHINE_PRICES, METERING_INTERVAL, WELCOME_CREDIT, LOW_BALANCE and PAYMENT_PROVIDER (CONTRACT 12)', () => {
    assert.deepEqual(
      loadConfig({ BILLING: 'off', MACHINE_PRICES: 'large=1.5, small=0.000001,medium=12', METERING_INTERVAL: '15s', WELCOME_CREDIT: '25', LOW_BALANCE: '0.50', PAYMENT_PROVIDER: 'simulated' }).billing,
      {
        enabled: false,
        pricesMicrosPerHour: { large: 1_500_000, small: 1, medium: 12_000_000 },
        pausedPricesMicrosPerHour: { large: 150_000, small: 0, medium: 1_200_000 },
        meteringIntervalMs: 15_000,
        welcomeCreditMicros: 25_000_000,
        lowBalanceMicros: 500_000,
        paymentProvider: 'simulated',
      },
    );
    // CONTRACT 20: `size=running/paused`, the old `size=running` beside it (paused a tenth of running).
    const both = loadConfig({ MACHINE_PRICES: 'small=0.05/0.002, medium=0.10, large=0.20 / 0' }).billing;
    assert.deepEqual([both.pricesMicrosPerHour, both.pausedPricesMicrosPerHour], [
      { small: 50_000, medium: 100_000, large: 200_000 },
      { small: 2_000, medium: 10_000, large: 0 },
    ]);
    for (const [variable, value] of [
      ['BILLING', 'maybe'],
      ['MACHINE_PRICES', 'small=0.05,medium=0.10'],
      ['MACHINE_PRICES', 'small=0.05,medium=0.10,large=0.20,huge=1'],
      ['MACHINE_PRICES', 'small=0.05,medium=-1,large=0.20'],
      ['MACHINE_PRICES', 'small=0.0000001,medium=0.10,large=0.20'],
      ['MACHINE_PRICES', 'small'],
      ['MACHINE_PRICES', 'small=0.05/,medium=0.10,large=0.20'],
      ['MACHINE_PRICES', 'small=0.05/0.01/0.001,medium=0.10,large=0.20'],
      ['MACHINE_PRICES', 'small=0.05/free,medium=0.10,large=0.20'],
      ['METERING_INTERVAL', '10ms'],
      ['METERING_INTERVAL', '2h'],
      ['METERING_INTERVAL', '1m,2m'],
      ['METERING_INTERVAL', 'often'],
      ['WELCOME_CREDIT', '10 USD'],
      ['WELCOME_CREDIT', '-1'],
      ['LOW_BALANCE', '1,00'],
      ['PAYMENT_PROVIDER', 'stripe'],
    ] as const) {
      assertRejects({ [variable]: value }, variable);
    }
  });

  test('the result is frozen, nested objects included', () => {
    const config = loadConfig({});
    assert.ok(Object.isFrozen(config));
    assert.ok(Object.isFrozen(config.webhook));
    assert.ok(Object.isFrozen(config.webhook.retryDelaysMs));
  });

  test('empty values of switches and numbers mean the default', () => {
    const config = loadConfig({ PORT: '', TRUST_PROXY: '', RATE_LIMIT: '', ROLE: '', SMTP_URL: '', WEBHOOK_MAX_ATTEMPTS: '' });
    assert.equal(config.port, 3000);
    assert.equal(config.trustProxy, false);
    assert.equal(config.rateLimit, true);
    assert.equal(config.role, 'all');
    assert.equal(config.smtpUrl, null);
    assert.equal(config.webhook.maxAttempts, 8);
  });

  test('PORT: a whole number from 1 to 65535; PUBLIC_URL follows it by default', () => {
    const config = loadConfig({ PORT: '8080' });
    assert.equal(config.port, 8080);
    assert.equal(config.publicUrl, 'http://localhost:8080');
    assert.equal(loadConfig({ PORT: '65535' }).port, 65535);
    assert.equal(loadConfig({ PORT: '1' }).port, 1);
    // Regression: PORT=0 was accepted, and the service listened on a random port nobody could find.
    for (const value of ['0', '00', 'abc', '-1', '65536', '3.5', '1e3', '0x50', '8 0']) assertRejects({ PORT: value }, 'PORT');
  });

  test('numbers forgive surrounding spaces, as switches do', () => {
    // Regression: parseSwitch trimmed its value but parseInteger did not, so " 80" was refused where " on " was not.
    assert.equal(loadConfig({ PORT: ' 80 ' }).port, 80);
    assert.equal(loadConfig({ WEBHOOK_MAX_ATTEMPTS: '3\n' }).webhook.maxAttempts, 3);
    assert.equal(loadConfig({ PORT: '   ' }).port, 3000);
  });

  test('HOST, MAIL_DIR and LOG_LEVEL', () => {
    const config = loadConfig({ HOST: '0.0.0.0', MAIL_DIR: '/tmp/outbox', LOG_LEVEL: 'warn' });
    assert.equal(config.host, '0.0.0.0');
    assert.equal(config.mailDir, '/tmp/outbox');
    assert.equal(config.logLevel, 'warn');
    assertRejects({ HOST: '  ' }, 'HOST');
    assertRejects({ MAIL_DIR: '' }, 'MAIL_DIR');
    assertRejects({ LOG_LEVEL: 'verbose' }, 'LOG_LEVEL');
  });

  test('PUBLIC_URL: an http(s) origin; https turns on secure cookies', () => {
    const https = loadConfig({ PUBLIC_URL: 'https://Platform.Example.com/' });
    assert.equal(https.publicUrl, 'https://platform.example.com');
    assert.equal(https.secureCookies, true);
    assert.equal(loadConfig({ PUBLIC_URL: 'http://127.0.0.1:8080' }).publicUrl, 'http://127.0.0.1:8080');
    assert.equal(loadConfig({ PUBLIC_URL: 'https://example.com:443' }).publicUrl, 'https://example.com');
    for (const value of [
      'https://example.com/app',
      'https://example.com/app/',
      'https://example.com/?a=1',
      'https://example.com/#top',
      'https://user:secret@example.com',
      'ftp://example.com',
      'example.com',
      'not a url',
      '',
    ]) {
      assertRejects({ PUBLIC_URL: value }, 'PUBLIC_URL');
    }
  });

  test('DATABASE_URL: sqlite:PATH, sqlite::memory: or postgres://', () => {
    for (const value of ['sqlite:./x.db', 'sqlite::memory:', 'sqlite:/var/lib/service.db', 'postgres://u:p@db:5432/app', 'postgresql://localhost/app']) {
      assert.equal(loadConfig({ DATABASE_URL: value }).databaseUrl, value);
    }
    for (const value of ['mysql://localhost/app', 'sqlite:', './service.db', 'postgres://[::1', '']) assertRejects({ DATABASE_URL: value }, 'DATABASE_URL');
  });

  test('SMTP_URL: smtp:// or smtps://, unset means .eml files', () => {
    assert.equal(loadConfig({ SMTP_URL: 'smtp://localhost:25' }).smtpUrl, 'smtp://localhost:25');
    assert.equal(loadConfig({ SMTP_URL: 'smtps://user:pass@mail.example.com:465' }).smtpUrl, 'smtps://user:pass@mail.example.com:465');
    // Regression: an SMTP_URL without a host (smtp:/, smtp://) was accepted.
    for (const value of ['http://mail.example.com', 'mail.example.com', 'smtp:/', 'smtp://', 'smtp://[bad']) assertRejects({ SMTP_URL: value }, 'SMTP_URL');
  });

  test('ROLE: api, worker or all', () => {
    for (const role of ['api', 'worker', 'all'] as const) assert.equal(loadConfig({ ROLE: role }).role, role);
    for (const value of ['web', 'ALL', 'api,worker']) assertRejects({ ROLE: value }, 'ROLE');
  });

  test('switches: TRUST_PROXY, RATE_LIMIT, WEBHOOK_ALLOW_PRIVATE_TARGETS take on/off and their synonyms', () => {
    for (const variable of ['TRUST_PROXY', 'RATE_LIMIT', 'WEBHOOK_ALLOW_PRIVATE_TARGETS']) {
      const read = (value: string) => {
        const config = loadConfig({ [variable]: value });
        return { TRUST_PROXY: config.trustProxy, RATE_LIMIT: config.rateLimit, WEBHOOK_ALLOW_PRIVATE_TARGETS: config.webhook.allowPrivateTargets }[variable];
      };
      for (const value of ['on', 'ON', 'true', 'yes', '1', ' on ']) assert.equal(read(value), true, `${variable}=${value}`);
      for (const value of ['off', 'Off', 'false', 'no', '0']) assert.equal(read(value), false, `${variable}=${value}`);
      for (const value of ['maybe', '2', 'enabled']) assertRejects({ [variable]: value }, variable);
    }
  });

  test('RETENTION and WEBHOOK_DISABLE_AFTER: durations with a unit, bounded below', () => {
    const config = loadConfig({ RETENTION: '7d', WEBHOOK_DISABLE_AFTER: '36h' });
    assert.equal(config.retention.periodMs, 7 * 86_400_000);
    assert.equal(config.webhook.disableAfterMs, 36 * 3_600_000);
    assert.equal(loadConfig({ RETENTION: ' 90m ', WEBHOOK_DISABLE_AFTER: '1.5d' }).retention.periodMs, 90 * 60_000);
    assert.equal(loadConfig({ WEBHOOK_DISABLE_AFTER: '1.5d' }).webhook.disableAfterMs, 36 * 3_600_000);
    for (const [variable, value] of [['RETENTION', '30'], ['RETENTION', '1s'], ['RETENTION', 'forever'], ['WEBHOOK_DISABLE_AFTER', '-1d'], ['WEBHOOK_DISABLE_AFTER', '1s']]) {
      assert.throws(() => loadConfig({ [variable!]: value }), (error: unknown) => error instanceof ConfigError && error.message.startsWith(`${variable} `), `${variable}=${value}`);
    }
  });

  test('WEBHOOK_TIMEOUT_MS and WEBHOOK_MAX_ATTEMPTS: bounded whole numbers', () => {
    const config = loadConfig({ WEBHOOK_TIMEOUT_MS: '2500', WEBHOOK_MAX_ATTEMPTS: '3' });
    assert.equal(config.webhook.timeoutMs, 2500);
    assert.equal(config.webhook.maxAttempts, 3);
    for (const value of ['0', '120001', 'ten', '1.5']) assertRejects({ WEBHOOK_TIMEOUT_MS: value }, 'WEBHOOK_TIMEOUT_MS');
    for (const value of ['0', '101', 'x']) assertRejects({ WEBHOOK_MAX_ATTEMPTS: value }, 'WEBHOOK_MAX_ATTEMPTS');
  });

  test('WEBHOOK_RETRY_DELAYS: a comma-separated list of durations in ms, s, m or h', () => {
    assert.deepEqual(loadConfig({ WEBHOOK_RETRY_DELAYS: '500ms, 1.5s,2m,1h' }).webhook.retryDelaysMs, [500, 1500, 120_000, 3_600_000]);
    for (const value of ['30s,,1m', '30', '30 seconds', '5d', 'soon', '', ',']) assertRejects({ WEBHOOK_RETRY_DELAYS: value }, 'WEBHOOK_RETRY_DELAYS');
  });
});

describe('bad configuration stops the server', () => {
  function runServer(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
    return new Promise((done) => {
      const child = execFile(
        './node_modules/.bin/node',
        ['src/server.ts'],
        { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env }, timeout: 20_000 },
        (_error, _stdout, stderr) => done({ code: child.exitCode, stderr }),
      );
    });
  }

  test('PORT=abc exits 1 with one line on stderr naming PORT', async () => {
    const { code, stderr } = await runServer({ PORT: 'abc' });
    assert.equal(code, 1);
    const lines = stderr.trimEnd().split('\n');
    assert.equal(lines.length, 1, `one line, got: ${stderr}`);
    assert.match(lines[0]!, /\bPORT\b/);
    assert.doesNotMatch(stderr, /\bat .*\.ts:\d+/, 'no stack trace');
  });

  test('PORT=0 exits 1 with one line naming PORT', async () => {
    const { code, stderr } = await runServer({ PORT: '0' });
    assert.equal(code, 1);
    assert.equal(stderr.trimEnd().split('\n').length, 1, `one line, got: ${stderr}`);
    assert.match(stderr, /\bPORT\b/);
  });

  test('a PUBLIC_URL with a path exits 1 with one line naming PUBLIC_URL', async () => {
    const { code, stderr } = await runServer({ PUBLIC_URL: 'https://example.com/app' });
    assert.equal(code, 1);
    assert.equal(stderr.trimEnd().split('\n').length, 1, `one line, got: ${stderr}`);
    assert.match(stderr, /\bPUBLIC_URL\b/);
  });
});

test('MACHINE_HOSTS: name=address pairs of unix://, tcp:// or ssh:// engines; the hosts settings are bounded', () => {
  const config = loadConfig({ MACHINE_HOSTS: 'a-1=unix:///run/a.sock, b=tcp://10.0.0.2:2376,c=ssh://deploy@edge', MACHINE_HOST_LOST_AFTER_MS: '5000', MACHINE_CPU_OVERCOMMIT: '2.5' });
  assert.deepEqual(config.machines.hosts, [
    { name: 'a-1', address: 'unix:///run/a.sock' },
    { name: 'b', address: 'tcp://10.0.0.2:2376' },
    { name: 'c', address: 'ssh://deploy@edge' },
  ]);
  assert.equal(config.machines.hostLostAfterMs, 5000);
  assert.equal(config.machines.cpuOvercommit, 2.5);
  for (const [value, message] of [
    ['a', /MACHINE_HOSTS must be name=address/],
    ['A=unix:///x', /bad host name "A"/],
    ['a=http://x', /must start with unix:\/\/, tcp:\/\/ or ssh:\/\//],
    ['a=unix:///x,a=unix:///y', /names "a" twice/],
    ['a=tcp://:2376', /is not a URL/],
    ['a=unix:relative', /needs an absolute path/],
  ] as const) {
    assert.throws(() => loadConfig({ MACHINE_HOSTS: value }), message, value);
  }
  assert.throws(() => loadConfig({ MACHINE_HOST_LOST_AFTER_MS: '10' }), /MACHINE_HOST_LOST_AFTER_MS must be between 1000/);
  assert.throws(() => loadConfig({ MACHINE_CPU_OVERCOMMIT: '0.5' }), /MACHINE_CPU_OVERCOMMIT must be between 1 and 64/);
});
