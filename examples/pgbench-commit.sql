-- PostgreSQL's own commit latency on this machine, without the gateway: one
-- single-row insert of a ~1 KB JSON document per transaction, as a ledger
-- write without the batching. Used for the README's performance section:
--
--   psql -h 127.0.0.1 -U postgres -d test -c 'CREATE TABLE IF NOT EXISTS pgbench_commit (scope text PRIMARY KEY, doc json NOT NULL, at timestamptz NOT NULL)'
--   pgbench -h 127.0.0.1 -U postgres -n -c 4 -j 1 -T 8 -R 1400 -M prepared -l -f examples/pgbench-commit.sql test
--   cat pgbench_log.* | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END {print "p50", a[int(NR*.5)]/1000, "ms, p99", a[int(NR*.99)]/1000, "ms"}'
--   psql -h 127.0.0.1 -U postgres -d test -c 'DROP TABLE pgbench_commit'; rm pgbench_log.*
--
-- With -R the logged latency counts from each transaction's scheduled start.
\set s random(1, 2000000000)
INSERT INTO pgbench_commit (scope, doc, at) VALUES ('evt_' || :s, json_build_object('scope', 'evt_' || :s, 'pad', repeat('x', 1000)), now()) ON CONFLICT (scope) DO NOTHING;
