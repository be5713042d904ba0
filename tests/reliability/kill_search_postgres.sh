#!/usr/bin/env bash
# kill_search.sh on PostgreSQL: the same SIGKILLed and resumed grid search workers, on a study in
# a throw-away server started here (tests/search/postgres_server.sh: initdb in a temp directory,
# unix socket only; stopped and removed on every exit). Exit 77 (skipped) without the server
# binaries (Debian: postgresql).
# Usage: QNUM=path/to/qnum bash kill_search_postgres.sh [KILLS] [SEED]
set -u
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../search/postgres_server.sh"
# In the background, so that a SIGTERM to this script runs its cleanup at once (bash defers
# traps while a foreground child runs).
STORAGE=$pg_url bash "$here/kill_search.sh" "$@" &
wait $!
