import { strict as assert } from 'node:assert';
import { asSession } from '../support/app.ts';
import { eventually, openSignedInPage, type SignedInPage } from '../support/browser.ts';
import { DOCKER_TEST_ENV, removeMachineContainers } from '../support/docker.ts';

/** A container boots, a command runs, in seconds on an idle host; this one is shared, and every step waits on the engine. */
export const MACHINE_MS = 120_000;
export const MACHINE_ACTION_MS = 60_000;

export interface DockerMachinePage extends SignedInPage {
  machineId: string;
  /** Closes the browser and the app, and removes the containers of every machine the app made. */
  close(): Promise<void>;
}

/** A signed-in Chromium page on a service with MACHINE_PROVIDER=docker, and a machine of it created and running. */
export async function openDockerMachinePage(machine: { name: string } & Record<string, unknown>): Promise<DockerMachinePage> {
  const ui = await openSignedInPage({ app: { realClock: true, env: { MACHINE_PROVIDER: 'docker', ...DOCKER_TEST_ENV, MACHINE_WORKER_INTERVAL_MS: '200' } } });
  const { live, user, page } = ui;
  const close = async () => {
    const machines = await live.app.deps.db.selectFrom('machines').select('id').execute();
    await ui.close();
    await removeMachineContainers(machines.map((row) => row.id));
  };
  try {
    page.setDefaultTimeout(MACHINE_ACTION_MS);
    const headers = asSession(user.session, live.baseUrl);
    const created = await live.app.inject({ method: 'POST', url: '/api/machines', headers, payload: machine });
    assert.equal(created.statusCode, 201, created.body);
    const machineId: string = created.json().id;
    await eventually(async () => {
      const status = (await live.app.inject({ method: 'GET', url: `/api/machines/${machineId}`, headers })).json().status;
      return status === 'running' ? true : undefined;
    }, 'the machine running', MACHINE_MS);
    return { ...ui, machineId, close };
  } catch (error) {
    await close();
    throw error;
  }
}
