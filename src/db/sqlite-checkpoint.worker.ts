// Runs in a worker thread: WAL checkpoints (which fsync the database file) happen
// here, on their own connection, so they never block the service's event loop.
import { DatabaseSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';

const { path, intervalMs } = workerData as { path: string; intervalMs: number };
const database = new DatabaseSync(path, { timeout: 5000 });
const checkpoint = database.prepare('PRAGMA wal_checkpoint(PASSIVE)');

function passiveCheckpoint(): void {
  try {
    checkpoint.all();
  } catch {
    // A busy database: the next tick tries again.
  }
}

const timer = setInterval(passiveCheckpoint, intervalMs);

parentPort!.on('message', (message) => {
  if (message === 'catch-up') {
    // The service holds its writers until this answer: the checkpoint copies every frame, and the next write starts the log from its beginning.
    passiveCheckpoint();
    parentPort!.postMessage('caught-up');
    return;
  }
  if (message !== 'stop') return;
  clearInterval(timer);
  try {
    database.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  } finally {
    database.close();
    parentPort!.close();
  }
});
