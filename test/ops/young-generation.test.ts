import { strict as assert } from 'node:assert';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { GROWTH_FLAG } from '../../src/ops/young-generation.ts';

/** A process that keeps what it allocates, as start-up does: the size of V8's young generation after it, in MB. */
function youngGenerationAfterStartUp(small: boolean): number {
  const program = `
    const { getHeapSpaceStatistics, setFlagsFromString } = require('node:v8');
    if (${small}) setFlagsFromString('${GROWTH_FLAG}=1');
    const kept = [];
    for (let i = 0; i < 400000; i++) kept.push({ i, s: 'x' + i, a: [i] });
    process.stdout.write(String(getHeapSpaceStatistics().find((space) => space.space_name === 'new_space').space_size / 1e6));
  `;
  return Number(execFileSync(process.execPath, ['-e', program], { encoding: 'utf8' }));
}

// Issue 42: the service holds its young generation small while it starts through this V8 flag; a Node whose V8
// drops or changes it would silently give back the 56 MB.
test('V8 still has the young generation growth flag, and it keeps the young generation small when set at run time', () => {
  assert.match(execFileSync(process.execPath, ['--v8-options'], { encoding: 'utf8' }), new RegExp(`${GROWTH_FLAG}\\b`));
  const grown = youngGenerationAfterStartUp(false);
  const held = youngGenerationAfterStartUp(true);
  assert.ok(grown >= 16, `without the flag the young generation grows (${grown} MB)`);
  // Its starting size is 1–2 MB; scavenges under way as the flag lands may leave it a few steps more on a loaded box
  // (5.5, 9.7 and 19.4 MB seen in CI, against 67 MB without): what holds is that it stays well under what it grows
  // to without. A V8 that ignored the flag would grow it the same both ways.
  assert.ok(held * 2 <= grown, `with it, it stays well under its size without (${held} MB, against ${grown} MB without)`);
});
