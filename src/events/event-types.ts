/** Every event type an endpoint can subscribe to. */
export const EVENT_TYPES = {
  'machine.created': 'A machine was created and booted',
  'machine.started': 'A stopped machine was turned on',
  'machine.stopped': 'A machine was turned off, its state kept (data.detail.reason says why)',
  'machine.paused': 'A running machine was frozen with its memory and processes (billed at the paused price)',
  'machine.resumed': 'A paused machine went on from where it was frozen',
  'machine.error': 'A machine failed to boot or crashed',
  'machine.expired': 'A machine reached its expiresAt; followed by a stop or a destroy',
  'machine.destroyed': 'A machine was deleted',
  'machine.claimed': 'A machine was taken from a warm pool',
  'run.succeeded': 'A scheduled job or webhook run finished successfully',
  'run.failed': 'A scheduled job or webhook run failed',
} as const;

export type EventType = keyof typeof EVENT_TYPES;

/** Sent only by the test operation, to one endpoint, whatever it subscribes to. */
export const TEST_EVENT_TYPE = 'webhook.test';

export const ALL_EVENT_TYPES = Object.keys(EVENT_TYPES) as EventType[];

export function isEventType(value: string): value is EventType {
  return Object.hasOwn(EVENT_TYPES, value);
}
