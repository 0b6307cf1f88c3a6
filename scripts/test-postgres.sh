#!/usr/bin/env bash
# Starts a throw-away PostgreSQL cluster for the store tests and prints
# the line to export: TOOLAGENT_TEST_POSTGRES_URL=postgres://...
#
#   eval "$(scripts/test-postgres.sh start DIR)"   # DIR: a new, empty directory
#   scripts/test-postgres.sh pause DIR    # stop the server, keep its data
#   scripts/test-postgres.sh resume DIR   # start it again: same data, same port
#   scripts/test-postgres.sh stop DIR     # stop it and remove DIR
#
# pause and resume are for the outage tests: the database goes away
# under a running daemon and comes back as it was.
# The cluster runs as an unprivileged user (postgres when it exists, else
# nobody), listens on loopback only (a free port) and trusts local
# connections: it is for tests, and removed with DIR. Needs Debian's
# postgresql package (initdb and pg_ctl under /usr/lib/postgresql/N/bin).
set -euo pipefail

cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
	echo "usage: $0 start|pause|resume|stop DIR" >&2
	exit 2
fi

bin=""
for d in /usr/lib/postgresql/*/bin; do
	[ -x "$d/initdb" ] && bin=$d
done
if [ -z "$bin" ] && command -v initdb >/dev/null 2>&1; then
	bin=$(dirname "$(command -v initdb)")
fi
if [ -z "$bin" ]; then
	echo "$0: no initdb: install the postgresql package (apt-get install -y postgresql)" >&2
	exit 1
fi

user=postgres
id "$user" >/dev/null 2>&1 || user=nobody
as_user() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u "$user" -- "$@"
	else
		"$@"
	fi
}

# serve starts the server of $dir on the port in $dir/port.
serve() {
	as_user "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
		-o "-c listen_addresses=127.0.0.1 -p $(cat "$dir/port") -k $dir -c max_connections=200 -c fsync=off" start >/dev/null ||
		{ cat "$dir/server.log" >&2; exit 1; }
}

case "$cmd" in
start)
	mkdir -p "$dir"
	[ "$(id -u)" = 0 ] && chown "$user" "$dir"
	as_user "$bin/initdb" -D "$dir/data" -U toolagent --auth=trust --encoding=UTF8 --no-instructions >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log" >&2; exit 1; }
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	echo "$port" >"$dir/port"
	serve
	as_user "$bin/createdb" -h 127.0.0.1 -p "$port" -U toolagent toolagent_test
	echo "export TOOLAGENT_TEST_POSTGRES_URL=postgres://toolagent@127.0.0.1:$port/toolagent_test?sslmode=disable"
	;;
pause)
	# A fast shutdown: sessions are ended (clients see the connection
	# go), the data stays.
	as_user "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null
	;;
resume)
	serve
	;;
stop)
	[ -d "$dir/data" ] && as_user "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
	rm -rf "$dir"
	;;
*)
	echo "usage: $0 start|pause|resume|stop DIR" >&2
	exit 2
	;;
esac
