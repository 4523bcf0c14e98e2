import type { App } from './app.ts';
import { ConfigError, loadConfig, type Config } from './config.ts';
import { describeStartupFailure, type StartupPhase } from './ops/startup-errors.ts';
import { describeStartup } from './ops/startup-line.ts';
import { keepYoungGenerationSmallWhileStarting } from './ops/young-generation.ts';

// Before the service's modules load (hence app.ts imported below, not above): see young-generation.ts.
const startingDone = keepYoungGenerationSmallWhileStarting();
const { buildApp } = await import('./app.ts');

/** A start-up that cannot work says why in one line, naming the variable, and exits 1. */
function exitWith(line: string): never {
  process.stderr.write(`${line}\n`);
  process.exit(1);
}

function failedToStart(error: unknown, phase: StartupPhase, config: Config): never {
  const { line, known } = describeStartupFailure(error, phase, config);
  // Not a configuration problem, so probably a bug: the stack is for whoever fixes it.
  if (!known && (config.logLevel === 'debug' || config.logLevel === 'trace')) process.stderr.write(`${(error as Error)?.stack ?? String(error)}\n`);
  exitWith(`Cannot start: ${line}${known ? '' : ' (LOG_LEVEL=debug prints the stack)'}`);
}

let config: Config;
try {
  config = loadConfig();
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  exitWith(`Invalid configuration: ${error.message}`);
}

let app: App;
try {
  app = await buildApp(config);
} catch (error) {
  failedToStart(error, 'build', config);
}

let address: string;
try {
  address = await app.listen({ port: config.port, host: config.host });
} catch (error) {
  // The database is open and the worker may have started: close them, but do not wait on them for long.
  await Promise.race([app.close().catch(() => {}), new Promise((resolve) => setTimeout(resolve, 2000).unref())]);
  failedToStart(error, 'listen', config);
}
startingDone();
app.deps.logger.info({ address, role: config.role }, 'listening');
// For the person who started it: stderr, so that stdout stays JSON lines for log shippers.
if (config.logLevel !== 'silent') process.stderr.write(`${describeStartup(config, address, app.machineHost, app.machineProvider.warnings?.() ?? [])}\n`);

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
