// bench/idle-memory.ts's detail start (`node --import` this): records every module the service loads, and on
// SIGUSR2 writes them with V8's figures and the process's threads to BENCH_IDLE_DETAIL_FILE.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { registerHooks } from 'node:module';
import { getHeapSpaceStatistics } from 'node:v8';

const modules = new Set<string>();
registerHooks({
  load(url, context, nextLoad) {
    modules.add(url);
    return nextLoad(url, context);
  },
});

const threads = () => readdirSync('/proc/self/task').map((task) => readFileSync(`/proc/self/task/${task}/comm`, 'utf8').trim());

process.on('SIGUSR2', () => {
  const report = { memory: process.memoryUsage(), heapSpaces: getHeapSpaceStatistics(), threads: threads(), modules: [...modules] };
  writeFileSync(process.env.BENCH_IDLE_DETAIL_FILE!, JSON.stringify(report));
});
