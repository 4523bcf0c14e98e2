#!/usr/bin/env bash
# What PostgreSQL writes per delivery: one run of a tree's bench/delivery.ts pipeline (its ceiling skipped), with
# the server's WAL counters (pg_stat_wal) reset before it. Unlike rates, these counts barely move with the load of
# a shared machine, so two trees can be compared from one run each.
#   bench/wal-per-delivery.sh [TREE] [DATABASE_URL]
# TREE defaults to this checkout; another is a checkout with node_modules (see alternate.sh). Where the database
# has the pg_stat_statements extension (shared_preload_libraries), the figures are also split by statement:
# the outbox write (emit), recording attempts (settle) and the rest.
set -euo pipefail
tree="$(cd "${1:-$(dirname "$0")/..}" && pwd)"
url="${2:-postgres://postgres@127.0.0.1:5432/test}"
node -e '
  const fs = require("node:fs");
  const source = fs.readFileSync(process.argv[1] + "/bench/delivery.ts", "utf8");
  const start = source.indexOf("for (let round = 0; round < 2; round++) {");
  fs.writeFileSync(process.argv[1] + "/bench/.pipe.ts", source.slice(0, start) + "console.log(JSON.stringify(await pipelineDeliveriesPerSecond(EVENTS)));\nawait receiver.stop();\nprocess.exit(0);\n");
' "$tree"
statements="$(psql "$url" -Atc "select count(*) from pg_extension where extname = 'pg_stat_statements'")"
psql "$url" -qAtc "select pg_stat_reset_shared('wal')" >/dev/null
[ "$statements" = 1 ] && psql "$url" -qAtc "select pg_stat_statements_reset()" >/dev/null
events="${BENCH_EVENTS:-5000}"
deliveries=$((events * 4))
(cd "$tree" && BENCH_EVENTS="$events" DATABASE_URL="$url" NODE_EXTRA_CA_CERTS=test/support/tls/ca.pem node_modules/.bin/node bench/.pipe.ts | tail -1)
psql "$url" -Atc "select 'WAL per delivery: ' || round(wal_records / $deliveries.0, 1) || ' records, ' || round(wal_bytes / $deliveries.0) || ' bytes, ' || round(wal_sync / $deliveries.0, 2) || ' syncs' from pg_stat_wal"
[ "$statements" = 1 ] && psql "$url" -Atc "
  select rpad(part, 7) || round(sum(calls) / $deliveries.0, 3) || ' statements, ' || round(sum(wal_records) / $deliveries.0, 2) || ' WAL records, '
    || round(sum(wal_bytes) / $deliveries.0) || ' WAL bytes, ' || round(sum(shared_blks_hit) / $deliveries.0, 1) || ' buffer hits, '
    || round(sum(total_exec_time)::numeric * 1000 / $deliveries) || ' µs executing'
  from (select case when query like '%insert into events%' or query like 'with source%' then 'emit'
                    when query like '%update deliveries%' or query like 'delete from jobs%' then 'settle' else 'rest' end as part, *
        from pg_stat_statements where query not like '%pg_stat%' and query not ilike 'create %' and query not ilike 'alter %' and query not ilike 'drop %') s
  group by part order by part"
exit 0
