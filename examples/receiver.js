// A receiver for Machine Platform event webhooks: verifies each delivery, answers 2xx at once,
// ignores repeats (deliveries can come more than once) and works on the event afterwards.
//
//   WEBHOOK_SECRET=whsec_… TLS_KEY=key.pem TLS_CERT=cert.pem PORT=8443 node examples/receiver.js
//
// Without TLS_KEY/TLS_CERT it serves plain HTTP, for use behind your own HTTPS front end.
import { readFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { verifyWebhook } from 'machine-platform-service/verify-webhook';

const secret = process.env.WEBHOOK_SECRET;
if (!secret) throw new Error('Set WEBHOOK_SECRET to the endpoint secret (whsec_…)');
const seen = new Set(); // use your database in production: deduplicate by event id

function handle(request, response) {
  const chunks = [];
  request.on('data', (chunk) => chunks.push(chunk));
  request.on('end', () => {
    let event;
    try {
      // The raw bytes, before any JSON parsing: the signature covers them exactly.
      event = verifyWebhook(Buffer.concat(chunks), request.headers['service-signature'], secret);
    } catch (error) {
      response.writeHead(400, { 'content-type': 'text/plain' }).end(error.message);
      return;
    }
    response.writeHead(204).end(); // acknowledge first, within 10 seconds
    if (seen.has(event.id)) return;
    seen.add(event.id);
    console.log(JSON.stringify({ id: event.id, type: event.type, createdAt: event.createdAt }));
  });
}

const tls = process.env.TLS_KEY && process.env.TLS_CERT
  ? { key: readFileSync(process.env.TLS_KEY), cert: readFileSync(process.env.TLS_CERT) }
  : null;
const server = tls ? createHttpsServer(tls, handle) : createHttpServer(handle);
server.listen(Number(process.env.PORT ?? 8443), process.env.HOST ?? '127.0.0.1', () => {
  console.error(`receiver listening on ${tls ? 'https' : 'http'}://${process.env.HOST ?? '127.0.0.1'}:${server.address().port}`);
});
