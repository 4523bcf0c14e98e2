import { buildApp } from './app.ts';
import { ConfigError, loadConfig } from './config.ts';

let config;
try {
  config = loadConfig();
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  process.stderr.write(`Invalid configuration: ${error.message}\n`);
  process.exit(1);
}

const app = await buildApp(config);
const address = await app.listen({ port: config.port, host: config.host });
app.deps.logger.info({ address, role: config.role }, 'listening');

let closing = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (closing) return;
    closing = true;
    app.deps.logger.info({ signal }, 'shutting down: finishing in-flight work');
    app.close().then(
      () => process.exit(0),
      (err: unknown) => {
        app.deps.logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  });
}
