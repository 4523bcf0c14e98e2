import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { DEFAULT_MACHINE_IMAGE } from '../../src/config.ts';
import { probeDiskLimits } from '../../src/providers/docker/disk-limits.ts';
import { dockerUnavailable, engine, startDockerApp, untilStatus, type DockerApp } from '../support/docker.ts';
import { newOwner } from '../support/machines.ts';
import { assertProblem } from '../support/problem.ts';
import { eventually } from '../support/receiver.ts';
import type { MetricSampleView } from '../../src/machine-access/machine-metrics.service.ts';

const skip = await dockerUnavailable();
const enforced = skip ? false : (await probeDiskLimits(engine(), DEFAULT_MACHINE_IMAGE)).enforced;

const GIB = 1024 ** 3;
/** The agent samples every 5 s: a few samples' time, on a shared engine. */
const SAMPLES_MS = 60_000;

type Sample = MetricSampleView;

/** CONTRACT 19: a real machine's usage, sampled by its agent every 5 s, kept an hour, read through the API. */
describe('the usage of a real machine', { skip, timeout: 300_000 }, () => {
  let app: DockerApp;
  let machineId = '';

  before(async () => {
    app = await startDockerApp({ env: { MACHINE_SIZES: 'small=1/1g/512/3g', MACHINE_PRICES: 'small=0.05' } });
    const created = await app.owner.call('POST', '/api/machines', { name: 'busy' });
    assert.equal(created.statusCode, 201, created.body);
    machineId = created.json().id;
    await untilStatus(app.owner, machineId, 'running', 120_000);
  });
  after(async () => {
    await app?.close();
  });

  const samples = async (query = ''): Promise<Sample[]> => {
    const answer = await app.owner.call('GET', `/api/machines/${machineId}/metrics${query}`);
    assert.equal(answer.statusCode, 200, answer.body);
    return answer.json().data;
  };

  test('samples with the machine’s limits; a CPU-heavy command shows in cpuPercent; `since` reads on', async (t) => {
    const first = await eventually(async () => ((await samples()).length > 0 ? samples() : undefined), SAMPLES_MS, 'a first sample');
    const sample = first.at(-1)!;
    t.diagnostic(`an idle machine: ${JSON.stringify(sample)}`);
    assert.equal(sample.memoryLimitBytes, GIB, "the size's memory");
    assert.ok(sample.memoryBytes > 0 && sample.memoryBytes < GIB, String(sample.memoryBytes));
    assert.ok(sample.pids >= 2, `the init and the agent at least: ${sample.pids}`);
    assert.ok(sample.diskBytes > 0 && sample.diskBytes <= sample.diskLimitBytes, `${sample.diskBytes} of ${sample.diskLimitBytes}`);
    if (enforced) assert.equal(sample.diskLimitBytes, 3 * GIB, "the size's disk, which the engine enforces");
    assert.ok(sample.cpuPercent >= 0 && sample.cpuPercent <= 100, String(sample.cpuPercent));
    // A machine that has just booted may be busy starting its desktop: quiet first, so that a rise is the command's.
    const quiet = await eventually(async () => {
      const latest = (await samples()).at(-1)!.cpuPercent;
      return latest < 50 ? latest : undefined;
    }, SAMPLES_MS, 'a quiet machine');

    // Through a file of 64 MiB, a disk that grows, and memory held by a process.
    const busy = await app.owner.call('POST', `/api/machines/${machineId}/processes`, {
      command: "head -c 67108864 /dev/urandom > /root/blob && timeout 30 sh -c 'while :; do :; done'",
    });
    assert.equal(busy.statusCode, 201, busy.body);
    const last = sample.at;
    const heavy = await eventually(async () => {
      const later = await samples(`?since=${encodeURIComponent(last)}`);
      assert.ok(later.every((each) => each.at > last), 'only samples after `since`');
      // A rise, not a figure: on a host whose cores other work shares, the loop gets less than the machine's CPU.
      return later.find((each) => each.cpuPercent >= quiet + 25);
    }, SAMPLES_MS, 'a sample of a busy CPU');
    assert.ok(heavy.cpuPercent <= 100, String(heavy.cpuPercent));
    const grown = await eventually(async () => (await samples()).find((each) => each.diskBytes >= sample.diskBytes + 60 * 1024 ** 2), 120_000, 'the disk grown by the file (counted at most every minute on btrfs)');
    assert.ok(grown.diskBytes <= grown.diskLimitBytes);

    const all = await samples();
    const times = all.map((each) => Date.parse(each.at));
    assert.deepEqual(times, [...times].sort((a, b) => a - b), 'oldest first');
    assert.ok(all.every((each, i) => i === 0 || (each.rxBytes >= all[i - 1]!.rxBytes && each.txBytes >= all[i - 1]!.txBytes)), 'network counters only grow');
  });

  test('bad input: a `since` that is no time is 400; another account’s machine and an unknown one are 404', async () => {
    for (const since of ['yesterday', '1700000000000', '2030-01-02']) {
      assertProblem(await app.owner.call('GET', `/api/machines/${machineId}/metrics?since=${since}`), 400, 'invalid_request');
    }
    assertProblem(await app.owner.call('GET', `/api/machines/${machineId}/metrics?until=2030-01-02T00:00:00Z`), 400, 'invalid_request');
    const stranger = await newOwner(app.ctx);
    assertProblem(await stranger.call('GET', `/api/machines/${machineId}/metrics`), 404, 'not_found');
    assertProblem(await app.owner.call('GET', '/api/machines/mch_01jd0000000000000000000000/metrics'), 404, 'not_found');
  });

  test('a stopped machine has no samples: they lived in it', async () => {
    assert.equal((await app.owner.call('POST', `/api/machines/${machineId}/stop`)).statusCode, 200);
    await untilStatus(app.owner, machineId, 'stopped', 120_000);
    assert.deepEqual(await samples(), []);
  });
});
