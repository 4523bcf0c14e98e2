// Runs in a worker thread: WAL checkpoints (which fsync the database file) happen
// here, on their own connection, so they never block the service's event loop.
// JavaScript, not TypeScript, and importing only Node's own modules: a thread
// that loads a .ts file loads Node's type stripper too, about 12 MB more for
// every SQLite service (bench/RESULTS.md, 2026-11-28).
import { DatabaseSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';

const { path, intervalMs } = /** @type {{ path: string, intervalMs: number }} */ (workerData);
const port = /** @type {import('node:worker_threads').MessagePort} */ (parentPort);
const database = new DatabaseSync(path, { timeout: 5000 });
const checkpoint = database.prepare('PRAGMA wal_checkpoint(PASSIVE)');

function passiveCheckpoint() {
  try {
    checkpoint.all();
  } catch {
    // A busy database: the next tick tries again.
  }
}

const timer = setInterval(passiveCheckpoint, intervalMs);

port.on('message', (message) => {
  if (message === 'catch-up') {
    // The service holds its writers until this answer: the checkpoint copies every frame, and the next write starts the log from its beginning.
    passiveCheckpoint();
    port.postMessage('caught-up');
    return;
  }
  if (message !== 'stop') return;
  clearInterval(timer);
  try {
    database.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  } finally {
    database.close();
    port.close();
  }
});
