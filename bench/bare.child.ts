// The baseline: a bare Fastify route answering the same JSON as GET /api/me.
import Fastify from 'fastify';

const account = { id: 'acct_01kc0000000000000000000000', email: 'bench@example.com', name: 'Bench', emailVerified: false, createdAt: '2026-11-22T10:00:00.000Z' };
const secondFactor = { totp: false, passkeys: 0, recoveryCodesLeft: 0 };
const app = Fastify({ logger: false });
app.get('/api/me', async () => ({ account, secondFactor }));
await app.listen({ port: 0, host: '127.0.0.1' });
const address = app.server.address();
process.send!({ port: typeof address === 'object' && address ? address.port : 0 });
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
