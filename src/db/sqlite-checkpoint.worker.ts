// Runs in a worker thread: WAL checkpoints (which fsync the database file) happen
// here, on their own connection, so they never block the service's event loop.
import { DatabaseSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';

const { path, intervalMs } = workerData as { path: string; intervalMs: number };
const database = new DatabaseSync(path, { timeout: 5000 });
const checkpoint = database.prepare('PRAGMA wal_checkpoint(PASSIVE)');

const timer = setInterval(() => {
  try {
    checkpoint.all();
  } catch {
    // A busy database: the next tick tries again.
  }
}, intervalMs);

parentPort!.on('message', (message) => {
  if (message !== 'stop') return;
  clearInterval(timer);
  try {
    database.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  } finally {
    database.close();
    parentPort!.close();
  }
});
