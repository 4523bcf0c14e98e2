import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';
import { KEPT_REPOSITORY, TEMPLATE_REPOSITORY, collectKeptImages, templateImage } from '../../src/providers/docker/templates.ts';
import { dockerUnavailable, engine, runToEnd, startDockerApp, untilStatus as untilStatusWithin, type DockerApp } from '../support/docker.ts';
import { newOwner, type Owner } from '../support/machines.ts';
import { eventually } from '../support/receiver.ts';

const skip = await dockerUnavailable();

/** References of templates' and kept images on the engine. */
async function platformImages(): Promise<string[]> {
  const images = await engine().listImages();
  return images.flatMap((image) => image.RepoTags ?? []).filter((tag) => tag.startsWith(`${TEMPLATE_REPOSITORY}:`) || tag.startsWith(`${KEPT_REPOSITORY}:`));
}
const ELEVEN_MINUTES = 11 * 60_000;
/** A boot on a shared, loaded engine can take longer than the usual minute: this test is about files, not speed. */
const untilStatus = (owner: Owner, machineId: string, status: string) => untilStatusWithin(owner, machineId, status, 180_000);

/**
 * CONTRACT 20 against a real Docker engine: a file written in a machine is in
 * every machine made from its template and in every fork, a running source
 * goes on after its copy (no machine.paused: the copy's freeze is not a
 * user's pause), the copies start without the source's records of processes,
 * a template's deletion removes its image (its machines keep their files), a
 * fork leaves no image behind; bad input changes nothing.
 */
describe('templates and forks on a real Docker engine', { skip, timeout: 900_000 }, () => {
  let app: DockerApp;
  let owner: Owner;
  const templateIds: string[] = [];
  // What the service logged: a host's refusal is said there, and a failure here shows it.
  const logs: string[] = [];
  const errorsLogged = () => logs.filter((line) => /"level":(50|40)/.test(line)).join('\n');

  before(async () => {
    app = await startDockerApp({ logs });
    ({ owner } = app);
  });
  after(async () => {
    const machineIds = app ? (await app.ctx.app.deps.db.selectFrom('machines').select('id').execute()).map((row) => row.id) : [];
    await app?.close();
    // Only this test's images: others may be saving theirs on the same engine.
    const ours = (await platformImages()).filter((tag) => [...templateIds, ...machineIds].some((id) => tag.includes(id)));
    for (const tag of ours.sort().reverse()) await engine().getImage(tag).remove().catch(() => {});
    for (const tag of ours) await engine().getImage(tag).remove().catch(() => {});
  });

  const readFile = async (machineId: string, path: string) => {
    const response = await owner.call('GET', `/api/machines/${machineId}/files?path=${encodeURIComponent(path)}`);
    return response.statusCode === 200 ? response.body : `(${response.statusCode}) ${response.body}`;
  };
  const create = async (body: Record<string, unknown>) => {
    const response = await owner.call('POST', '/api/machines', body);
    assert.equal(response.statusCode, 201, response.body);
    return response.json() as { id: string; envNames: string[]; template: string | null };
  };

  test('a file written in a machine is in its template’s machines and in every fork; the source goes on', async () => {
    const source = await create({ name: 'toolchain', env: { TOOL_TOKEN: 'from-the-source' } });
    await untilStatus(owner, source.id, 'running');
    const put = await owner.call('PUT', `/api/machines/${source.id}/files?path=/root/work/notes.txt`, 'written in the source');
    assert.equal(put.statusCode, 204, put.body);
    assert.equal((await runToEnd(owner, source.id, { command: 'mkdir -p /opt/tool && echo built > /opt/tool/version' })).exitCode, 0);
    const process = await owner.call('POST', `/api/machines/${source.id}/processes`, { command: 'sleep 3600' });
    assert.equal(process.statusCode, 201, process.body);

    const saved = await owner.call('POST', '/api/templates', { machineId: source.id, name: 'with-tool' });
    assert.equal(saved.statusCode, 201, `${saved.body}\n${errorsLogged()}`);
    const template = saved.json() as { id: string; sizeBytes: number; sourceMachineId: string };
    templateIds.push(template.id);
    assert.equal(template.sourceMachineId, source.id);
    const image = await engine().getImage(templateImage(template.id)).inspect();
    assert.equal(template.sizeBytes, image.Size, 'sizeBytes is the image’s size');
    assert.ok(template.sizeBytes > 0);

    // The running source was frozen for the copy only: it runs, and recorded no pause.
    assert.equal((await owner.call('GET', `/api/machines/${source.id}`)).json().status, 'running');
    assert.equal((await runToEnd(owner, source.id, { command: 'echo still here' })).stdout, 'still here\n');
    const events = (await owner.call('GET', '/api/events?limit=100')).json() as { data: Array<{ type: string }> };
    assert.ok(!events.data.some((event) => event.type === 'machine.paused'), 'no machine.paused');

    const fromTemplate = await create({ name: 'from-template', template: 'with-tool' });
    assert.equal(fromTemplate.template, template.id);
    assert.deepEqual(fromTemplate.envNames, ['TOOL_TOKEN']);
    await untilStatus(owner, fromTemplate.id, 'running');
    assert.equal(await readFile(fromTemplate.id, '/root/work/notes.txt'), 'written in the source');
    assert.equal(await readFile(fromTemplate.id, '/opt/tool/version'), 'built\n');
    assert.equal((await runToEnd(owner, fromTemplate.id, { command: 'echo "$TOOL_TOKEN"' })).stdout, 'from-the-source\n');
    assert.deepEqual((await owner.call('GET', `/api/machines/${fromTemplate.id}/processes`)).json().data, [], 'not the source’s processes');

    const forked = await owner.call('POST', `/api/machines/${source.id}/fork`, { count: 2, name: 'copy' });
    assert.equal(forked.statusCode, 201, `${forked.body}\n${errorsLogged()}`);
    const copies = forked.json().data as Array<{ id: string; name: string }>;
    assert.deepEqual(copies.map((copy) => copy.name), ['copy-1', 'copy-2']);
    for (const copy of copies) {
      await untilStatus(owner, copy.id, 'running');
      assert.equal(await readFile(copy.id, '/root/work/notes.txt'), 'written in the source');
      assert.equal(await readFile(copy.id, '/opt/tool/version'), 'built\n');
      assert.deepEqual((await owner.call('GET', `/api/machines/${copy.id}/processes`)).json().data, []);
    }
    // Each copy is its own disk.
    assert.equal((await owner.call('PUT', `/api/machines/${copies[0]!.id}/files?path=/root/work/notes.txt`, 'changed in copy-1')).statusCode, 204);
    assert.equal(await readFile(copies[1]!.id, '/root/work/notes.txt'), 'written in the source');
    assert.equal(await readFile(source.id, '/root/work/notes.txt'), 'written in the source');
    const forkImages = (await platformImages()).filter((tag) => tag.includes(`fork-${source.id}`));
    assert.equal(forkImages.length, 1, 'one commit for the two copies');

    // A stopped machine forks too, from its disk as it was left.
    assert.equal((await owner.call('POST', `/api/machines/${copies[0]!.id}/stop`)).statusCode, 200);
    await untilStatus(owner, copies[0]!.id, 'stopped');
    const ofStopped = await owner.call('POST', `/api/machines/${copies[0]!.id}/fork`, { count: 1 });
    assert.equal(ofStopped.statusCode, 201, `${ofStopped.body}\n${errorsLogged()}`);
    await untilStatus(owner, ofStopped.json().data[0].id, 'running');
    assert.equal(await readFile(ofStopped.json().data[0].id, '/root/work/notes.txt'), 'changed in copy-1');

    // Deleting the template removes its image; its machine keeps its files, across a stop and a start.
    assert.equal((await owner.call('DELETE', `/api/templates/${template.id}`)).statusCode, 204);
    await assert.rejects(engine().getImage(templateImage(template.id)).inspect(), (error: { statusCode?: number }) => error.statusCode === 404);
    assert.equal((await owner.call('POST', `/api/machines/${fromTemplate.id}/stop`)).statusCode, 200);
    await untilStatus(owner, fromTemplate.id, 'stopped');
    assert.equal((await owner.call('POST', `/api/machines/${fromTemplate.id}/start`)).statusCode, 200);
    await untilStatus(owner, fromTemplate.id, 'running');
    assert.equal(await readFile(fromTemplate.id, '/opt/tool/version'), 'built\n');

    // Kept images go once no machine stands on them: not before.
    await collectKeptImages(engine(), Date.now() + ELEVEN_MINUTES);
    assert.ok((await platformImages()).includes(`${KEPT_REPOSITORY}:${template.id}`), 'the deleted template is kept for its machine');
    assert.ok((await platformImages()).includes(forkImages[0]!), 'the fork image is kept for its copies');
    for (const machine of [fromTemplate, ...copies, ofStopped.json().data[0]]) assert.equal((await owner.call('DELETE', `/api/machines/${machine.id}`)).statusCode, 200);
    await collectKeptImages(engine(), Date.now() + ELEVEN_MINUTES);
    const left = (await platformImages()).filter((tag) => tag.includes(template.id) || tag.includes(source.id) || tag.includes(copies[0]!.id));
    assert.deepEqual(left, [], 'nothing is left of the deleted template or the forks');
  });

  test('bad input is a clear 4xx and makes nothing on the engine: fork count outside 1–10, another account’s machine or template', async () => {
    const source = await create({ name: 'guarded' });
    await untilStatus(owner, source.id, 'running');
    const saved = await owner.call('POST', '/api/templates', { machineId: source.id, name: 'guarded' });
    assert.equal(saved.statusCode, 201, saved.body);
    templateIds.push(saved.json().id);
    const imagesBefore = (await platformImages()).sort();
    const containersBefore = (await engine().listContainers({ all: true })).length;

    for (const count of [0, 11]) {
      const refused = await owner.call('POST', `/api/machines/${source.id}/fork`, { count });
      assert.equal(refused.statusCode, 400, refused.body);
    }
    const stranger = await newOwner(app.ctx);
    for (const [method, url, body] of [
      ['POST', `/api/machines/${source.id}/fork`, { count: 1 }],
      ['POST', '/api/templates', { machineId: source.id, name: 'stolen' }],
      ['POST', '/api/machines', { name: 'thief', template: saved.json().id }],
      ['DELETE', `/api/templates/${saved.json().id}`, undefined],
    ] as const) {
      const response = await stranger.call(method, url, body);
      assert.equal(response.statusCode, 404, `${method} ${url}: ${response.body}`);
    }
    assert.deepEqual((await platformImages()).sort(), imagesBefore);
    assert.equal((await engine().listContainers({ all: true })).length, containersBefore);
    await eventually(async () => ((await owner.call('GET', `/api/templates/${saved.json().id}`)).statusCode === 200 ? true : undefined), 1000, 'the template still there');
  });
});
