import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** One registry per app instance, so tests can build many apps in one process. */
export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const httpRequests = new Counter({
    name: 'http_requests_total',
    help: 'HTTP requests answered, by method, route and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const httpDuration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time to answer HTTP requests',
    labelNames: ['method', 'route'] as const,
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  // Children per label set: prom-client hashes the labels on every call otherwise, a cost paid per request.
  const counters = new Map<string, { inc(): void }>();
  const durations = new Map<string, { observe(value: number): void }>();
  const observeResponse = (method: string, route: string, status: number, seconds: number) => {
    const routeKey = `${method} ${route}`;
    const statusKey = `${routeKey} ${status}`;
    let counter = counters.get(statusKey);
    if (counter === undefined) counters.set(statusKey, (counter = httpRequests.labels({ method, route, status })));
    let duration = durations.get(routeKey);
    if (duration === undefined) durations.set(routeKey, (duration = httpDuration.labels({ method, route })));
    counter.inc();
    duration.observe(seconds);
  };
  return { registry, httpRequests, httpDuration, observeResponse };
}

export type Metrics = ReturnType<typeof createMetrics>;
