import type Docker from 'dockerode';
import type { FastifyBaseLogger } from 'fastify';

/** After the engine's event stream breaks, how long before it is opened again. */
const RECONNECT_MS = 1000;

/**
 * Follows the engine's events for the containers carrying `label` and calls
 * `notice` with the label's value (the machine id) when one of them ends
 * (`die`: stopped, killed, crashed, out of memory) or is paused or unpaused
 * (by an operator's `docker pause`, or by our own pause), so the machine is looked
 * at now rather than at its next periodic check. Reconnects until stopped;
 * answers the function that stops it.
 */
export function watchEngine(docker: Docker, label: string, notice: (machineId: string) => void, logger: FastifyBaseLogger): () => void {
  let stopped = false;
  let stream: NodeJS.ReadableStream | null = null;
  let timer: NodeJS.Timeout | undefined;

  const connect = async () => {
    try {
      const events = (await docker.getEvents({ filters: { type: ['container'], event: ['die', 'pause', 'unpause'], label: [label] } })) as NodeJS.ReadableStream;
      if (stopped) return void (events as unknown as { destroy(): void }).destroy();
      stream = events;
      let pending = '';
      events.on('data', (chunk: Buffer) => {
        pending += chunk.toString('utf8');
        let newline: number;
        while ((newline = pending.indexOf('\n')) >= 0) {
          const line = pending.slice(0, newline);
          pending = pending.slice(newline + 1);
          try {
            const machineId = (JSON.parse(line) as { Actor?: { Attributes?: Record<string, string> } }).Actor?.Attributes?.[label];
            if (machineId) notice(machineId);
          } catch (err) {
            logger.warn({ err }, 'an engine event could not be read');
          }
        }
      });
      events.once('error', () => reconnect());
      events.once('end', () => reconnect());
    } catch (err) {
      logger.warn({ err }, 'the engine event stream could not be opened; machines are still checked periodically');
      reconnect();
    }
  };
  const reconnect = () => {
    stream = null;
    if (stopped || timer !== undefined) return;
    timer = setTimeout(() => {
      timer = undefined;
      void connect();
    }, RECONNECT_MS);
    timer.unref();
  };
  void connect();
  return () => {
    stopped = true;
    clearTimeout(timer);
    (stream as unknown as { destroy(): void } | null)?.destroy();
  };
}
