import { strict as assert } from 'node:assert';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, mock, test } from 'node:test';
import { systemClock } from '../../src/shared/clock.ts';

const LONGEST_TIMER_MS = 2 ** 31 - 1;
const DAY = 24 * 60 * 60 * 1000;

/**
 * The service's real clock: a job due in a month (a schedule, a retention
 * sweep) must not fire now because Node's timers stop at about 24.8 days.
 */
describe('systemClock.setTimeout', () => {
  test('a wait longer than Node’s longest timer does not fire at once', async () => {
    let fired = false;
    const timer = systemClock.setTimeout(() => (fired = true), 30 * DAY);
    await sleep(50);
    timer.clear();
    assert.equal(fired, false);
  });

  test('it fires when the whole wait has passed, not when the first leg ends; clear stops a later leg', () => {
    mock.timers.enable({ apis: ['setTimeout'] });
    try {
      let fired = 0;
      systemClock.setTimeout(() => fired++, 2 * LONGEST_TIMER_MS + 10);
      mock.timers.tick(LONGEST_TIMER_MS);
      mock.timers.tick(LONGEST_TIMER_MS);
      assert.equal(fired, 0, 'two legs passed, ten ms left');
      mock.timers.tick(10);
      assert.equal(fired, 1);

      let cleared = 0;
      const timer = systemClock.setTimeout(() => cleared++, LONGEST_TIMER_MS + 5);
      mock.timers.tick(LONGEST_TIMER_MS);
      timer.clear();
      mock.timers.tick(10);
      assert.equal(cleared, 0);
    } finally {
      mock.timers.reset();
    }
  });
});
