import type { Deps } from '../deps.ts';
import type { Job, JobKind, Outcome } from '../jobs/job-kind.ts';
import { hostRetryDelay } from '../machines/job-types.ts';
import { hostKind } from '../machines/machines.jobs.ts';
import type { MachineProvider } from '../providers/provider.ts';
import { runExecuteJob, scheduleTickJob } from './job-types.ts';
import { executeRun } from './runs.service.ts';
import { fireSchedule } from './schedules.service.ts';

/** Runs executing at once in one process: a slow command holds one slot, never a request or another job. */
export const RUN_CONCURRENCY = 8;

/** The runs room's background work: schedules' ticks and runs' executions. */
export function runJobKinds(deps: Deps, provider: MachineProvider) {
  return [
    hostKind(scheduleTickJob, ({ scheduleId }) => fireSchedule(deps, provider, scheduleId)),
    {
      type: runExecuteJob,
      concurrency: RUN_CONCURRENCY,
      retryDelay: hostRetryDelay,
      async perform(job: Job<{ runId: string }>, signal: AbortSignal): Promise<Outcome> {
        const execution = await executeRun(deps, provider, job.payload.runId, signal, job.attempts);
        // Let go mid-run: back to the queue at once, for any process to wait for its outcome.
        return execution === 'released' ? { status: 'release' } : { status: 'done' };
      },
    } satisfies JobKind<{ runId: string }>,
  ];
}
