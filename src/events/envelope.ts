import { toIso } from '../shared/clock.ts';
import { newId } from '../shared/ids.ts';
import type { EventType } from './event-types.ts';
import type { EventsTable } from './events.tables.ts';

/** A change a domain reports, inside the transaction that makes it. */
export interface NewEvent {
  accountId: string;
  type: EventType;
  data: Record<string, unknown>;
}

/** What is delivered. */
export interface EventEnvelope {
  id: string;
  type: string;
  createdAt: string;
  data: Record<string, unknown>;
}

export function newEnvelope(type: string, data: Record<string, unknown>, now: number): EventEnvelope {
  return { id: newId('evt', now), type, createdAt: toIso(now), data };
}

/** The stored event: the envelope serialised once, so every attempt and redelivery sends the same bytes. */
export function eventRow(accountId: string, envelope: EventEnvelope, now: number): EventsTable {
  return { id: envelope.id, account_id: accountId, type: envelope.type, payload: JSON.stringify(envelope), machine_id: machineIdOf(envelope.data), created_at: now };
}

/** `data.machine.id`: machine events and run events carry the machine. */
function machineIdOf(data: Record<string, unknown>): string | null {
  const machine = data['machine'];
  if (typeof machine !== 'object' || machine === null) return null;
  const id = (machine as Record<string, unknown>)['id'];
  return typeof id === 'string' ? id : null;
}
