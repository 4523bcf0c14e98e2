import { readFileSync } from 'node:fs';
import { stripTypeScriptTypes } from 'node:module';
import { fileURLToPath } from 'node:url';
import { setEnvironmentData, Worker, type WorkerOptions } from 'node:worker_threads';

const HAND_OVER = 'startWorkerThread: the modules, stripped';

/**
 * The new thread's first code, before the entry module: it takes the modules
 * stripped for it (given to it as it was created) and serves them through a
 * load hook, so Node never loads its type stripper there.
 */
const BOOTSTRAP = `
const { registerHooks } = require('node:module');
const { getEnvironmentData } = require('node:worker_threads');
const { entry, sources } = getEnvironmentData(${JSON.stringify(HAND_OVER)});
registerHooks({
  load(url, context, nextLoad) {
    const source = sources[url];
    return source === undefined ? nextLoad(url, context) : { format: 'module', source, shortCircuit: true };
  },
});
import(entry);
`;

const RELATIVE_TYPESCRIPT_IMPORT = /^\s*(?:import|export)\s[^'";]*?\bfrom\s*['"](\.{1,2}\/[^'"]+\.ts)['"]|^\s*import\s*['"](\.{1,2}\/[^'"]+\.ts)['"]/gm;

/**
 * A worker thread running one of the service's TypeScript modules. Node
 * strips types with a WebAssembly module that each thread loads with its first
 * `.ts` file, at about 12 MB of memory; this thread has it loaded already, so
 * it strips the entry and the modules it imports by relative path, and the new
 * thread runs them as JavaScript. A module missed here is stripped by the new
 * thread as usual: it costs memory, not behaviour. With plain `new Worker`s
 * instead, 100,000 deliveries pending took the service past its 300 MB target
 * (bench/RESULTS.md, 2026-11-28).
 */
export function startWorkerThread(entry: URL, options: WorkerOptions = {}): Worker {
  const sources = strippedModules(entry);
  // A thread copies the environment data as it is created, so the modules are there before its first line; a message
  // posted after the constructor is only there if this thread gets to it before the new one starts.
  setEnvironmentData(HAND_OVER, { entry: entry.href, sources });
  try {
    return new Worker(BOOTSTRAP, { ...options, eval: true });
  } finally {
    setEnvironmentData(HAND_OVER, undefined);
  }
}

/**
 * Items for another thread, sent as one message per turn of the event loop:
 * a message costs far more than an item in it, and what one turn produces
 * (the attempts a claim starts, the answers a poll of sockets brings) is
 * usually many.
 */
export function perTurn<Item>(send: (items: Item[]) => void): { add(item: Item): void; flush(): void } {
  let items: Item[] = [];
  const flush = () => {
    if (items.length === 0) return;
    const batch = items;
    items = [];
    send(batch);
  };
  return {
    add(item) {
      if (items.length === 0) setImmediate(flush);
      items.push(item);
    },
    flush,
  };
}

const stripped = new Map<string, Record<string, string>>();

/** The entry and every module it reaches by relative imports, without their types, by URL (once per process). */
function strippedModules(entry: URL): Record<string, string> {
  let sources = stripped.get(entry.href);
  if (sources !== undefined) return sources;
  sources = {};
  const pending = [entry];
  while (pending.length > 0) {
    const url = pending.pop()!;
    if (url.href in sources) continue;
    const source = withoutExperimentalWarning(() => stripTypeScriptTypes(readFileSync(fileURLToPath(url), 'utf8')));
    sources[url.href] = source;
    for (const [, from, bare] of source.matchAll(RELATIVE_TYPESCRIPT_IMPORT)) pending.push(new URL((from ?? bare)!, url));
  }
  stripped.set(entry.href, sources);
  return sources;
}

/**
 * `stripTypeScriptTypes` is the stripper Node runs on every module of this
 * service, but as a function of its own Node 24 still calls it experimental
 * and says so once on stderr, where operators would read it as a problem.
 */
function withoutExperimentalWarning<T>(run: () => T): T {
  const emitWarning = process.emitWarning;
  process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
    const type = typeof rest[0] === 'string' ? rest[0] : (rest[0] as { type?: string } | undefined)?.type;
    if (type !== 'ExperimentalWarning') (emitWarning as (...args: unknown[]) => void).call(process, warning, ...rest);
  }) as typeof process.emitWarning;
  try {
    return run();
  } finally {
    process.emitWarning = emitWarning;
  }
}
