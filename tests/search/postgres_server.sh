# Sourced by the tests that need a real PostgreSQL server (tests/search/test_postgres.sh,
# tests/reliability/kill_search_postgres.sh): starts a throw-away one and sets
#   pg_url      postgresql://qnum@/studies?host=...&port=... (database "studies", user qnum, trust)
#   pg_work     its temp directory (data, logs, unix socket); also a scratch space for the caller
#   pg_bindir   the server binaries' directory
#   pg_as_user  the prefix that runs a server binary (runuser -u postgres -- when run as root:
#               initdb refuses root), e.g. "${pg_as_user[@]}" "$pg_bindir/createdb" ...
# The server listens only on a unix socket in $pg_work (no TCP listener). Exits 77 (skipped) when
# the server binaries are not installed (Debian: postgresql), 1 when the server cannot start.
# Cleanup on every exit path: an EXIT trap (also run on SIGTERM/SIGINT/SIGHUP) kills the caller's
# background jobs, stops the server and removes $pg_work; a watchdog outside the caller's process
# tree does the same if the caller is SIGKILLed (CTest's timeout), since the postmaster detaches.
pg_bindir=""
pg_has_tools() { [ -x "$1/initdb" ] && [ -x "$1/pg_ctl" ] && [ -x "$1/createdb" ]; }
for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
  if pg_has_tools "$d"; then pg_bindir=$d; break; fi
done
if [ -z "$pg_bindir" ] && command -v initdb >/dev/null 2>&1; then # elsewhere on PATH (links resolved)
  d=$(dirname "$(readlink -f "$(command -v initdb)")")
  pg_has_tools "$d" && pg_bindir=$d
fi
if [ -z "$pg_bindir" ]; then
  echo "PostgreSQL server binaries (initdb, pg_ctl, createdb) not found: skipped (Debian: apt-get install postgresql)"
  exit 77
fi

pg_work=$(mktemp -d /tmp/qnum-pg.XXXXXX) # short: a unix socket path must stay under 108 bytes
pg_as_user=()
if [ "$(id -u)" -eq 0 ]; then
  pg_user=nobody
  id postgres >/dev/null 2>&1 && pg_user=postgres
  chown "$pg_user" "$pg_work"
  pg_as_user=(runuser -u "$pg_user" --)
fi
pg_stop_cmd="${pg_as_user[*]} '$pg_bindir/pg_ctl' -D '$pg_work/data' -m immediate stop >/dev/null 2>&1; rm -rf '$pg_work'"
pg_stop() { # the caller's jobs get SIGTERM (a script among them runs its own cleanup), then SIGKILL
  kill $(jobs -p) 2>/dev/null
  sleep 0.2
  kill -9 $(jobs -p) 2>/dev/null
  eval "$pg_stop_cmd"
}
trap pg_stop EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
trap 'exit 129' HUP
# The watchdog: double-forked (reparented away from the caller, so a kill of the caller's
# process tree misses it) with its output detached (CTest waits for the output pipe to close).
( setsid bash -c "while kill -0 $$ 2>/dev/null; do sleep 1; done; $pg_stop_cmd" \
  </dev/null >/dev/null 2>&1 & )

pg_port=5432 # no TCP listener (listen_addresses ''): the port only names the socket file
if ! "${pg_as_user[@]}" "$pg_bindir/initdb" -D "$pg_work/data" -U qnum --auth=trust -E UTF8 --no-sync \
     >"$pg_work/initdb.log" 2>&1; then
  cat "$pg_work/initdb.log"; echo "initdb failed"; exit 1
fi
if ! "${pg_as_user[@]}" "$pg_bindir/pg_ctl" -D "$pg_work/data" -l "$pg_work/server.log" -w -t 60 \
     -o "-k $pg_work -h '' -p $pg_port -F" start >/dev/null; then
  cat "$pg_work/server.log"; echo "the PostgreSQL server did not start"; exit 1
fi
"${pg_as_user[@]}" "$pg_bindir/createdb" -h "$pg_work" -p $pg_port -U qnum studies || { echo "createdb failed"; exit 1; }
pg_url="postgresql://qnum@/studies?host=$pg_work&port=$pg_port"
echo "PostgreSQL server: $pg_bindir, socket in $pg_work"
