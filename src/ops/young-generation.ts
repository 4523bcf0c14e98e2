import { setFlagsFromString } from 'node:v8';

/** V8's own flag: by how much the young generation grows when a scavenge finds most of it still alive. */
export const GROWTH_FLAG = '--semi-space-growth-factor';
/** V8's default for GROWTH_FLAG (`node --v8-options`). */
const DEFAULT_GROWTH = 2;

/**
 * Keeps V8's young generation at its starting size while the service starts,
 * and lets it grow again as usual once it has (the function returned). Start-up
 * loads some 1,700 modules and compiles every route's schemas: nearly all of it
 * survives, so each scavenge finds its space full of live objects and V8 grows
 * it to its largest (tens of MB of pages, which an idle process keeps resident:
 * 56 MB of a started service's 222, issue 42). Kept small, start-up scavenges
 * more often, and the same objects move to the old generation as before. Under
 * load the young generation grows as it always did.
 * Left alone when the process was started with its own semi-space flags.
 */
export function keepYoungGenerationSmallWhileStarting(execArgv: readonly string[] = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? ''): () => void {
  if ([...execArgv, nodeOptions].some((option) => /semi[-_]space/.test(option))) return () => {};
  setFlagsFromString(`${GROWTH_FLAG}=1`);
  return () => setFlagsFromString(`${GROWTH_FLAG}=${DEFAULT_GROWTH}`);
}
