import type { FastifyBaseLogger } from 'fastify';
import pg from 'pg';
import type { Signal } from './signals.ts';

const RECONNECT_DELAY_MS = 1000;

/**
 * LISTENs on PostgreSQL for signals from other processes, reconnecting after
 * a lost connection (the poll covers what was missed meanwhile).
 */
export function listenForSignals(url: string, channel: string, onSignal: (signal: Signal) => void, logger: FastifyBaseLogger): () => Promise<void> {
  let client: pg.Client | null = null;
  let closed = false;
  let retry: NodeJS.Timeout | null = null;

  const connect = async () => {
    const next = new pg.Client({ connectionString: url });
    next.on('notification', (message) => {
      if (message.payload) onSignal(message.payload as Signal);
    });
    next.on('error', (err) => {
      logger.warn({ err }, 'signal listener lost its connection');
      void next.end().catch(() => {});
      if (client === next) client = null;
      scheduleReconnect();
    });
    try {
      await next.connect();
      await next.query(`LISTEN "${channel}"`);
      if (closed) return void (await next.end());
      client = next;
      onSignal('due');
    } catch (err) {
      logger.warn({ err }, 'signal listener could not connect; retrying');
      void next.end().catch(() => {});
      scheduleReconnect();
    }
  };
  const scheduleReconnect = () => {
    if (closed || retry !== null) return;
    retry = setTimeout(() => {
      retry = null;
      void connect();
    }, RECONNECT_DELAY_MS);
    retry.unref();
  };

  void connect();
  return async () => {
    closed = true;
    if (retry !== null) clearTimeout(retry);
    await client?.end().catch(() => {});
  };
}
