import { after, before } from 'node:test';
import type { TestContext } from './app.ts';
import type { Owner } from './machines.ts';

/** A describe block's app and its owner, filled in by the block's before hook. */
export interface Suite {
  ctx: TestContext;
  owner: Owner;
}

/** A suite whose app listens on 127.0.0.1 at `base`; the clients a test puts in `clients` are closed before the app. */
export interface ListeningSuite extends Suite {
  base: string;
  clients: Array<{ close(): Promise<unknown> }>;
}

/** An app and its owner as a start function gives them, with what ends them. */
export interface StartedApp extends Suite {
  close(): Promise<void>;
}

/** Registers the block's before/after hooks around an app from `start`: the suite's fields are set once the block starts. */
export function suiteHooks(start: () => Promise<StartedApp>): Suite {
  return hooks(start, false);
}

/** As suiteHooks, with the app listening on 127.0.0.1 and the suite's clients closed before it. */
export function listeningSuiteHooks(start: () => Promise<StartedApp>): ListeningSuite {
  return hooks(start, true);
}

function hooks(start: () => Promise<StartedApp>, listen: boolean): ListeningSuite {
  const suite = { clients: [] as ListeningSuite['clients'] } as ListeningSuite;
  let started: StartedApp | undefined;
  before(async () => {
    started = await start();
    suite.ctx = started.ctx;
    suite.owner = started.owner;
    if (listen) suite.base = await started.ctx.app.listen({ port: 0, host: '127.0.0.1' });
  });
  after(async () => {
    for (const client of suite.clients) await client.close();
    await started?.close();
  });
  return suite;
}
