// An HTTPS receiver in its own process, so that it does not share an event loop with what is measured.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import { fileURLToPath } from 'node:url';

const tls = (name: string) => readFileSync(fileURLToPath(new URL(`../test/support/tls/${name}`, import.meta.url)));
let count = 0;
let receipts: Array<[string, number]> = [];
let recording = false;

const server = createServer({ key: tls('server.key'), cert: tls('server.pem') }, (req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    count += 1;
    if (recording) {
      const id = /"id":"(evt_[0-9a-z]+)"/.exec(Buffer.concat(chunks).toString('utf8'))?.[1] ?? '';
      receipts.push([id, performance.timeOrigin + performance.now()]);
    }
    res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
  });
});
server.keepAliveTimeout = 60_000;

server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.send!({ port: typeof address === 'object' && address ? address.port : 0 });
});

process.on('message', (message: { cmd: string }) => {
  if (message.cmd === 'port') {
    const address = server.address();
    process.send!({ port: typeof address === 'object' && address ? address.port : 0 });
  } else if (message.cmd === 'reset') {
    count = 0;
    receipts = [];
    recording = false;
    process.send!({ ok: true });
  } else if (message.cmd === 'record') {
    recording = true;
    process.send!({ ok: true });
  } else if (message.cmd === 'stats') {
    process.send!({ count, receipts });
  }
});
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
