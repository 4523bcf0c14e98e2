import { AppError, invalidRequest, notFound } from '../http/errors.ts';
import type { MachineStatus } from './machines.tables.ts';

export const machineNotFound = () => notFound('The machine');

export const poolNotFound = () => notFound('The pool');

export const invalidState = (detail: string) => new AppError(409, 'invalid_state', detail);

/** A paused machine's refusal names the way out: its processes are frozen until it is resumed. */
export const wrongStatus = (action: string, status: MachineStatus) =>
  invalidState(
    status === 'paused'
      ? `The machine is paused; it cannot ${action} now. Resume it first (POST /api/machines/{id}/resume, or the machine_resume tool).`
      : `The machine is ${status}; it cannot ${action} now.`,
  );

/** Another request or process changed the machine between our read and our write. */
export const changedMeanwhile = () => invalidState('The machine changed while this request ran. Read it again and retry.');

/** The host (provider) failed at what it was asked; the machine was put in `error`, from where it can be started or destroyed again. */
export const hostFailed = (action: 'boot' | 'stop' | 'destroy') =>
  new AppError(502, 'provider_error', `The host failed to ${action} the machine; it is now in state error (machine.error). Start or destroy it to try again.`);

/** The host failed to pause or resume; nothing was recorded, so the machine is as it was. */
export const hostFailedToFreeze = (action: 'pause' | 'resume', status: MachineStatus) =>
  new AppError(502, 'provider_error', `The host failed to ${action} the machine; it is still ${status}. Try again.`);

/** Account holders never see hosts: the machine's is "its host", never named. */
export const hostNotAnswering = () =>
  invalidState('The machine’s host is not answering: the machine can be started once its host is back (it is set to what it really is then, with an event), or destroyed now.');

export const machineExpired = () => invalidState('The machine has expired; it cannot be started again.');

export const poolEmpty = (pool: string) =>
  new AppError(409, 'pool_empty', `The pool "${pool}" has no machine to hand out (its count is 0). Raise its count or create the machine without a pool.`);

export const poolNameTaken = (name: string) => new AppError(409, 'conflict', `A pool named "${name}" already exists.`);

export const unknownImage = (images: readonly string[]) => invalidRequest(`image must be one of ${images.join(', ')} (GET /api/images).`);

export const unknownSize = (sizes: readonly string[]) => invalidRequest(`size must be one of ${sizes.join(', ')}.`);

/** The machine's provider does not offer files or processes (the simulated one). */
export const notSupported = (what: string, provider: string) =>
  new AppError(409, 'not_supported', `The ${provider} machine provider offers no ${what}; run the service with MACHINE_PROVIDER=docker for real machines.`);

/** The screen tools of a machine without a display. */
export const noDisplay = () =>
  new AppError(409, 'no_display', 'This machine has no display: its image has none, or its provider draws no screen. The default image (npm run machine-image) has one.');

export const templateNotFound = () => notFound('The template');

export const templateNameTaken = (name: string) => new AppError(409, 'conflict', `A template named "${name}" already exists.`);

export const templateLimitReached = (max: number) =>
  new AppError(409, 'limit_reached', `An account can keep at most ${max} templates; delete one you no longer need (DELETE /api/templates/{id}).`);

/** A warm pool makes its machines from the template: deleting it would leave the pool nothing to refill from. */
export const templateInUse = (pools: readonly string[]) =>
  new AppError(409, 'template_in_use', `The template is used by the warm pool${pools.length > 1 ? 's' : ''} ${pools.map((name) => `"${name}"`).join(', ')}; delete ${pools.length > 1 ? 'those pools' : 'that pool'} first.`);

/** The host failed to copy a machine's disk; nothing was saved or created. */
export const hostFailedToCopy = (what: 'save the machine as a template' | 'fork the machine') =>
  new AppError(502, 'provider_error', `The host failed to ${what}; nothing was created. Try again.`);
