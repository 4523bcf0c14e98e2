import type { Deps } from '../deps.ts';
import type { Job, JobKind, Outcome } from '../jobs/job-kind.ts';
import { hostRetryDelay } from '../machines/job-types.ts';
import { hostKind } from '../machines/machines.jobs.ts';
import type { MachineProvider } from '../providers/provider.ts';
import { SECOND } from '../shared/clock.ts';
import { runExecuteJob, scheduleTickJob } from './job-types.ts';
import { executeRun } from './runs.service.ts';
import { fireSchedule } from './schedules.service.ts';

/** Runs executing at once in one process: a slow command holds one slot, never a request or another job. */
export const RUN_CONCURRENCY = 8;
/** How soon a run whose host does not answer asks again (the host watcher pings at least this often). */
const HOST_SILENT_RECHECK_MS = 5 * SECOND;

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
        if (execution === 'released') return { status: 'release' };
        // Not a failure: the run is finished from the machine's record once its host answers again.
        if (execution === 'host-silent') return { status: 'later', at: deps.clock.now() + HOST_SILENT_RECHECK_MS };
        return { status: 'done' };
      },
    } satisfies JobKind<{ runId: string }>,
  ];
}
