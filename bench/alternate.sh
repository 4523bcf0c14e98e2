#!/usr/bin/env bash
# Alternating throughput runs of two trees, one right after the other: the ceiling and pipeline part of each
# tree's own bench/delivery.ts (BENCH_ONLY=throughput, or, in a tree from before that switch, the file up to its
# ratio line), ROUNDS times, before then after.
#   bench/alternate.sh BEFORE_TREE [ROUNDS] [DATABASE_URL]
# BEFORE_TREE is a checkout with node_modules (e.g. git worktree add --detach /tmp/before 9430615 &&
# ln -s "$PWD/node_modules" /tmp/before/node_modules). An older tree gets a generated bench/.alternate.ts.
set -euo pipefail
after="$(cd "$(dirname "$0")/.." && pwd)"
before="$(cd "$1" && pwd)"
rounds="${2:-3}"
entry() { if grep -q BENCH_ONLY "$1/bench/delivery.ts"; then echo bench/delivery.ts; else echo bench/.alternate.ts; fi; }
for tree in "$before" "$after"; do
  [ "$(entry "$tree")" = bench/delivery.ts ] && continue
  node -e '
    const fs = require("node:fs");
    const source = fs.readFileSync(process.argv[1] + "/bench/delivery.ts", "utf8");
    const start = source.indexOf("console.log(`  ${ratioLine(\x27deliveries per second\x27");
    const end = source.indexOf("\n", start);
    fs.writeFileSync(process.argv[1] + "/bench/.alternate.ts", source.slice(0, end + 1) + "\nawait receiver.stop();\nprocess.exit(0);\n");
  ' "$tree"
done
for _ in $(seq 1 "$rounds"); do
  for tree in "$before" "$after"; do
    out="$(cd "$tree" && BENCH_ONLY=throughput DATABASE_URL="${3:-}" NODE_EXTRA_CA_CERTS=test/support/tls/ca.pem node_modules/.bin/node "$(entry "$tree")" 2>&1)"
    echo "$( [ "$tree" = "$after" ] && echo after || echo before): $(echo "$out" | grep -E 'request\(\) \(64|events → deliveries|CPU µs per delivery|deliveries per second' | sed 's/^ *//' | paste -sd '|')"
  done
done
