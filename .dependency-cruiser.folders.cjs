/**
 * Folders of src/ must not import each other in a circle: a domain that needs
 * another is built on it, never the other way too. Left out of this check:
 * the composition root (src/*.ts: app, server, deps, config), which wires
 * every folder, and db/database.ts, which composes the domains' table types
 * (the Kysely pattern). The other rules are in .dependency-cruiser.cjs.
 */
module.exports = {
  forbidden: [
    {
      name: 'no-folder-cycles',
      comment: 'Folders of src/ must not import each other in a circle.',
      severity: 'error',
      scope: 'folder',
      from: { path: '^src/[^/]+$' },
      to: { circular: true },
    },
  ],
  options: {
    tsPreCompilationDeps: true,
    exclude: { path: ['^src/[^/]+[.]ts$', '^src/db/database[.]ts$', 'node_modules'] },
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
