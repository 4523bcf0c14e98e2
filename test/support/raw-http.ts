import { strict as assert } from 'node:assert';
import { connect } from 'node:net';
import { PUBLIC_URL } from './app.ts';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** Everything the server wrote, as it came. */
  raw: string;
}

/** Writes bytes to the server as they are and reads the answer until the server closes the connection. */
export function exchange(port: number, bytes: string): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('utf8')));
    socket.on('error', reject);
    socket.on('close', () => {
      const [head = '', ...rest] = received.split('\r\n\r\n');
      const [statusLine = '', ...headerLines] = head.split('\r\n');
      const headers = Object.fromEntries(headerLines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: rest.join('\r\n\r\n'), raw: received });
    });
    socket.write(bytes);
  });
}

export function assertRawProblem(response: RawResponse, status: number, code: string): void {
  assert.equal(response.status, status, response.raw);
  assert.match(response.headers['content-type'] ?? '', /^application\/problem\+json/);
  const body = JSON.parse(response.body);
  assert.deepEqual(Object.keys(body).sort(), ['code', 'detail', 'status', 'title', 'type']);
  assert.equal(body.status, status);
  assert.equal(body.code, code);
  assert.equal(body.type, `${PUBLIC_URL}/docs/errors#${code}`);
}
