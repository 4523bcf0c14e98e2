/**
 * The module boundaries of src/, checked on every `npm test` (`npm run depcheck`).
 *
 * Base layers import no domain: http/ (error format, auth hook, validation),
 * db/ (connections, transactions, batched writes, migrations), shared/ (clock,
 * ids, secrets, signals), mail/ (the mailer), jobs/ (the queue and its runner)
 * and rate-limits/ (counters). Domains: accounts/, api-keys/, events/,
 * event-webhooks/, mcp/, dashboard/, ops/, security-log/, and machines in
 * four rooms (MACHINE_ROOMS below).
 *
 * A domain uses another only through the files listed in PUBLIC below: they
 * are each domain's surface; everything else in a folder is its own business.
 * Folder cycles are checked by .dependency-cruiser.folders.cjs.
 */
const BASE = '^src/(http|db|shared|mail|jobs|rate-limits)/';
/**
 * Machines are four rooms, each built on the ones before it and free to use
 * any of their files: providers/ (the seam to a host: what a host does, and
 * the machine agent's API inside a machine; simulated and Docker), machines/
 * (lifecycle, pools, templates, tokens), runs/ (runs, schedules, inbound
 * webhooks) and machine-access/ (files, processes, screens, live view,
 * terminal, previews, MCP). A room never imports one after it: what a later
 * room must do when a machine changes state it registers as a follower
 * (machines/machine-transitions.ts).
 */
const MACHINE_ROOMS = ['providers', 'machines', 'runs', 'machine-access'];
const DOMAINS = ['accounts', 'api-keys', 'billing', 'events', 'event-webhooks', ...MACHINE_ROOMS, 'mcp', 'oauth', 'dashboard', 'ops', 'security-log'];
const roomsAfter = (room) => MACHINE_ROOMS.slice(MACHINE_ROOMS.indexOf(room) + 1);

/** What each domain offers the others. */
const PUBLIC = [
  // The outbox (how any domain emits an event) and the signature verifier receivers copy (inbound webhooks share its scheme).
  '^src/event-webhooks/(outbox[.]ts|verify-webhook[.]js)$',
  // The SSRF guard for outgoing requests (OAuth client metadata documents are fetched through it too).
  '^src/event-webhooks/targets[.]ts$',
  // The event catalogue and the envelope.
  '^src/events/(event-types|envelope|events[.]repository)[.]ts$',
  // Serving MCP over HTTP, and how a domain defines its tools.
  '^src/mcp/(mcp[.]http|mcp[.]plugin|tools)[.]ts$',
  // The account as other tables join it in (an API key read with its owner).
  '^src/accounts/accounts[.]repository[.]ts$',
  // Billing as machines and accounts use it: metering a machine's state changes, the 402 and the balance-empty stop, the welcome credit.
  '^src/billing/(metering|enforcement|welcome-credit)[.]ts$',
  // The security log, which every domain that changes what protects an account writes to (CONTRACT 17).
  '^src/security-log/security-log[.]ts$',
  // Each domain's plugin, for the composition root.
  '^src/[^/]+/[^/]+[.]plugin[.]ts$',
];

module.exports = {
  forbidden: [
    {
      name: 'no-module-cycles',
      comment: 'No module imports itself through others: a cycle means two files are one responsibility, or a missing lower layer.',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'base-layers-import-no-domain',
      comment: 'http/, db/, shared/, mail/, jobs/ and rate-limits/ serve every domain and know none (db/database.ts composing the domains\' *.tables.ts types is the Kysely pattern).',
      severity: 'error',
      from: { path: BASE, pathNot: '^src/db/database[.]ts$' },
      to: { path: `^src/(${DOMAINS.join('|')})/` },
    },
    {
      name: 'database-composes-only-table-types',
      comment: 'db/database.ts may reach into a domain only for its table types.',
      severity: 'error',
      from: { path: '^src/db/database[.]ts$' },
      to: { path: `^src/(${DOMAINS.join('|')})/`, pathNot: '[.]tables[.]ts$' },
    },
    ...MACHINE_ROOMS.slice(0, -1).map((room) => ({
      name: `${room}-imports-no-later-room`,
      comment: `${room}/ is built on by ${roomsAfter(room).join(', ')}, never the other way.`,
      severity: 'error',
      from: { path: `^src/${room}/` },
      to: { path: `^src/(${roomsAfter(room).join('|')})/` },
    })),
    ...DOMAINS.map((domain) => ({
      name: `${domain}-used-through-its-public-files`,
      comment: `Other domains use ${domain}/ only through the files PUBLIC lists${MACHINE_ROOMS.includes(domain) && roomsAfter(domain).length > 0 ? `; the machine rooms after it use all of it` : ''}.`,
      severity: 'error',
      // The composition root (src/*.ts: app, server, deps, config) wires every domain; db/database.ts composes their table types.
      from: { path: '^src/', pathNot: [`^src/${domain}/`, '^src/[^/]+[.]ts$', '^src/db/database[.]ts$', ...(MACHINE_ROOMS.includes(domain) ? roomsAfter(domain).map((room) => `^src/${room}/`) : [])] },
      to: { path: `^src/${domain}/`, pathNot: PUBLIC },
    })),
  ],
  options: {
    // Type-only imports are dependencies too: a type in the wrong layer drags the layer's knowledge along.
    tsPreCompilationDeps: true,
    doNotFollow: { path: 'node_modules' },
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
