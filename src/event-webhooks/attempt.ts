// An attempt's outcome and the sender's shape, apart from sender.ts: a process whose attempts go through the
// sending thread (thread-sender.ts) never loads undici on its own thread (issue 42).

export interface AttemptResult {
  ok: boolean;
  /** The receiver's HTTP status, or null when no response came. */
  status: number | null;
  /** At most the first 1,024 bytes of the response body. */
  body: string | null;
  error: string | null;
  durationMs: number;
}

export interface Sender {
  /** One attempt; `signal` ends it early (the process let the delivery go), answered as a failure saying how far it got. */
  send(url: string, headers: Record<string, string>, body: string, signal?: AbortSignal): Promise<AttemptResult>;
  close(): Promise<void>;
}

/** Receivers answer anything; PostgreSQL text refuses NUL, and one such answer must not sink the batch it is recorded with. */
export function storable(text: string | null): string | null {
  return text === null ? null : text.replaceAll('\u0000', '\uFFFD');
}

/** Why an attempt was let go, from its signal. */
export function abortMessage(signal: AbortSignal): string {
  return signal.reason instanceof Error ? signal.reason.message : 'aborted';
}

/** An attempt that failed before anything was sent (a refused target, a stopped sending thread). */
export function failedBeforeSending(error: string): AttemptResult {
  return { ok: false, status: null, body: null, error: storable(error), durationMs: 0 };
}
