import type { Deps } from '../deps.ts';
import type { MachineFollower } from '../machines/machine-follower.ts';
import { runExecuteJob } from './job-types.ts';
import { failPendingRuns } from './run-events.ts';
import { pendingRunsOf } from './runs.repository.ts';
import { deleteTriggersOfMachine } from './triggers.repository.ts';

/** Runs follow their machine: they start when it comes up, fail when it goes down first, and a destroyed machine's schedules and inbound webhooks go with it. */
export const runsFollowMachines: MachineFollower<Deps> = {
  async running(deps, tx, machine) {
    const waiting = await pendingRunsOf(tx.db, machine.id);
    await deps.jobs.enqueue(tx, runExecuteJob, waiting.map((run) => ({ payload: { runId: run.id } })));
  },
  down: (deps, tx, machine, cause) => failPendingRuns(deps, tx, machine, `${cause} before the run could start.`),
  destroyed: (_deps, tx, machine) => deleteTriggersOfMachine(tx.db, machine.id),
};
