import { AppError, invalidRequest, notFound } from '../../http/errors.ts';

export const invalidPreviewHost = (detail: string) => invalidRequest(detail);

export const invalidPort = () => invalidRequest('The port must be a whole number from 1 to 65535.');

export const previewMachineNotFound = () => notFound('The machine of this preview');

/** Private by default: neither X-Preview-Token, a signed link's cookie, nor a public port. */
export const previewPrivate = () =>
  new AppError(401, 'preview_private', 'This preview is private: send the machine’s preview token as X-Preview-Token, open a signed link (POST /api/machines/{id}/previews), or make the port public.');

export const invalidPreviewLink = () =>
  new AppError(401, 'invalid_preview_link', 'This preview link has expired, was signed for another port or machine, or was voided by a new machine token. Ask for a new link.');

export const machineNotRunning = (status: string) =>
  new AppError(503, 'machine_not_running', `The machine is ${status}: nothing is served until it runs. ${status === 'paused' ? 'Resume' : 'Start'} it and reload.`);

export const portClosed = (port: number) =>
  new AppError(502, 'port_closed', `Nothing listens on port ${port} in the machine (on 127.0.0.1 or 0.0.0.0). Start the server there and reload.`);

export const previewUnreachable = (port: number) =>
  new AppError(502, 'port_closed', `The machine's port ${port} did not answer with HTTP. Check the server listening there and reload.`);

/** The machine's provider reaches no port inside machines (the simulated one). */
export const previewsNotSupported = (provider: string) =>
  new AppError(409, 'not_supported', `The ${provider} machine provider serves no previews; run the service with MACHINE_PROVIDER=docker for real machines.`);
