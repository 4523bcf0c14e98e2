import { jobType } from '../jobs/job-kind.ts';

/** A schedule's next tick. */
export const scheduleTickJob = jobType<{ scheduleId: string }>('schedule.tick');
/** Executes a pending run (once its machine runs), or fails one whose executing process died. */
export const runExecuteJob = jobType<{ runId: string }>('run.execute');
