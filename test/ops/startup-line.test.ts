import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';
import { loadConfig } from '../../src/config.ts';
import type { MachineHost } from '../../src/machines/machines.plugin.ts';
import { describeStartup } from '../../src/ops/startup-line.ts';

const simulated: MachineHost = { configured: 'simulated', provider: 'simulated', noEngine: null, image: () => null };
const docker: MachineHost = { configured: 'docker', provider: 'docker', noEngine: null, image: () => ({ status: 'ready' }) };

describe('the start-up line a person reads', () => {
  test('the defaults: the dashboard URL, the SQLite file, mail as files (no SMTP_URL), the simulated provider', () => {
    const config = loadConfig({ MAIL_DIR: '/srv/mail' });
    assert.equal(
      describeStartup(config, 'http://127.0.0.1:3000', simulated),
      'Machine Platform is ready: dashboard and API at http://localhost:3000 (listening on http://127.0.0.1:3000) · the SQLite database at ./data/service.db · mail as .eml files in /srv/mail (SMTP_URL is not set) · machines on the simulated provider: they run no commands (MACHINE_PROVIDER=simulated; auto or docker for real machines on a Docker engine)',
    );
  });

  test('PostgreSQL and SMTP are named without their credentials; a worker has no dashboard', () => {
    const config = loadConfig({ DATABASE_URL: 'postgres://app:s3cret-db@db.internal:5433/platform', SMTP_URL: 'smtps://mailer:s3cret-smtp@smtp.example.com:465', ROLE: 'worker' });
    const line = describeStartup(config, 'http://127.0.0.1:3000', docker);
    assert.equal(
      line,
      'Machine Platform is ready: worker (ROLE=worker): background jobs, with /healthz, /readyz and /metrics at http://127.0.0.1:3000 · the PostgreSQL database "platform" on db.internal:5433 · mail through SMTPS on smtp.example.com:465 · machines on the docker provider (MACHINE_PROVIDER=docker)',
    );
    assert.doesNotMatch(line, /s3cret|mailer|app:/);
  });

  test('an in-memory database says nothing is kept; ROLE=api says no jobs run there', () => {
    const line = describeStartup(loadConfig({ DATABASE_URL: 'sqlite::memory:', ROLE: 'api', PUBLIC_URL: 'https://platform.example.com' }), 'http://127.0.0.1:3000', simulated);
    assert.match(line, /dashboard and API at https:\/\/platform\.example\.com \(listening on http:\/\/127\.0\.0\.1:3000\), no background jobs here \(ROLE=api\)/);
    assert.match(line, /an in-memory SQLite database \(nothing is kept\)/);
    assert.equal(line.split('\n').length, 1);
  });

  test('what an operator must know is said on the same line: machines whose disks are not limited', () => {
    const line = describeStartup(loadConfig({ MACHINE_PROVIDER: 'docker' }), 'http://127.0.0.1:3000', docker, ["machines' disks are NOT limited: the engine's overlay2 storage cannot limit a container's disk. One machine can fill the host's disk."]);
    assert.match(line, / · WARNING: machines' disks are NOT limited: .* One machine can fill the host's disk\.$/);
    assert.equal(line.split('\n').length, 1);
  });

  test('MACHINE_PROVIDER=auto says what it chose: the simulated provider, why, and how to get real machines', () => {
    const line = describeStartup(loadConfig({}), 'http://127.0.0.1:3000', { configured: 'auto', provider: 'simulated', noEngine: 'no Docker engine at unix:///var/run/docker.sock', image: () => null });
    assert.match(line, / · machines on the simulated provider: they run no commands \(MACHINE_PROVIDER=auto: no Docker engine at unix:\/\/\/var\/run\/docker\.sock\); for real machines, start a Docker engine \(or point DOCKER_HOST at one\) and restart$/);
  });

  test('MACHINE_PROVIDER=auto on an engine: the docker provider, and the machine image being built while machines wait', () => {
    let image: ReturnType<MachineHost['image']> = { status: 'building', since: 0 };
    const host: MachineHost = { configured: 'auto', provider: 'docker', noEngine: null, image: () => image };
    assert.match(describeStartup(loadConfig({}), 'http://127.0.0.1:3000', host), / · machines on the docker provider \(MACHINE_PROVIDER=auto: a Docker engine answered\); its machine image is being built \(a few minutes, once\): machines created meanwhile wait in starting$/);
    image = { status: 'ready' };
    assert.match(describeStartup(loadConfig({}), 'http://127.0.0.1:3000', host), / · machines on the docker provider \(MACHINE_PROVIDER=auto: a Docker engine answered\)$/);
  });
});
