#!/usr/bin/env bash
# bench-tracing.sh: what the OpenTelemetry instrumentation costs when
# tracing is off (no OTEL_* variable set), against the binary before it.
#
# Builds this tree's binary and the one of BASE (a git revision; default
# the merge base with main), then, in interleaved rounds, starts
# `toolagent serve` (sandbox off) from each and drives `echo hello`
# (shell-exec) through POST /v1/call with wrk (Debian package wrk). Per run
# it prints calls/s, p50 and p99 latency and the daemon's own CPU per call
# (its user and system time and its children's, from /proc/PID/stat:
# other processes on the host do not count), then per round the new/base
# ratios of calls/s and of CPU per call, measured in the same round, and
# their medians, and the two binaries' sizes.
#
#   scripts/bench-tracing.sh [ROUNDS] [SECONDS] [CONCURRENCY]
#   scripts/bench-tracing.sh 5 6 4           # the defaults
#
# Environment: BASE (git revision), PORT (default 18766), TRACING=on to
# measure the new binary with tracing on instead, exporting to a sink on
# loopback that accepts and drops every export.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${1:-5}
secs=${2:-6}
conc=${3:-4}
port=${PORT:-18766}
base=${BASE:-$(git merge-base HEAD main)}
command -v wrk >/dev/null || { echo "bench-tracing: needs wrk (apt-get install wrk)" >&2; exit 1; }
for v in $(env | grep -o '^OTEL_[A-Z_]*' || true); do unset "$v"; done

work=$(mktemp -d)
pid=""
sink=""
trap 'kill $pid $sink 2>/dev/null || true; rm -rf "$work"' EXIT
go build -o "$work/new" ./cmd/toolagent
mkdir "$work/src"
git archive "$base" | tar -x -C "$work/src"
(cd "$work/src" && go build -o "$work/base" ./cmd/toolagent)

if [ "${TRACING:-off}" = on ]; then
	# A sink that answers every OTLP/HTTP export with 200 and drops it.
	python3 -c '
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        open(sys.argv[2], "a").write(self.path + "\n")
        self.send_response(200); self.send_header("Content-Type", "application/x-protobuf"); self.end_headers()
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()' $((port + 1)) "$work/exports" &
	sink=$!
fi

cat > "$work/post.lua" <<'EOF'
wrk.method = "POST"
wrk.body = '{"tool":"shell-exec","params":{"cmd":"echo hello"}}'
wrk.headers["Content-Type"] = "application/json"
done = function(summary, latency, requests)
  io.write(string.format("RESULT %d %d %.3f %.3f %d\n", summary.requests, summary.duration,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
EOF

cpu() { awk '{print $14 + $15 + $16 + $17}' "/proc/$1/stat"; } # clock ticks: the daemon and its waited-for children
hz=$(getconf CLK_TCK)

start() { # start BINARY
	rm -rf "$work/state"
	if [ "$1" = new ] && [ -n "$sink" ]; then
		OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$((port + 1))" "$work/$1" serve --listen "127.0.0.1:$port" --state "$work/state" \
			--tools native-repo/tools --sandbox off --max-concurrent 256 --log-level warn >"$work/serve.log" 2>&1 &
	else
		"$work/$1" serve --listen "127.0.0.1:$port" --state "$work/state" --tools native-repo/tools \
			--sandbox off --max-concurrent 256 --log-level warn >"$work/serve.log" 2>&1 &
	fi
	pid=$!
	for _ in $(seq 300); do
		curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "serve did not become ready:" >&2; cat "$work/serve.log" >&2; exit 1
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }

declare -A rate cost
printf '%-6s %-5s %10s %9s %9s %12s %6s\n' round bin calls/s p50_ms p99_ms cpu_ms/call errors
for r in $(seq "$rounds"); do
	order="base new"
	[ $((r % 2)) -eq 0 ] && order="new base" # neither always runs first
	for bin in $order; do
		start "$bin"
		wrk -t2 -c"$conc" -d2s -s "$work/post.lua" "http://127.0.0.1:$port/v1/call" >/dev/null # warm-up
		c0=$(cpu "$pid")
		out=$(wrk -t2 -c"$conc" -d"${secs}s" -s "$work/post.lua" "http://127.0.0.1:$port/v1/call" | grep '^RESULT')
		c1=$(cpu "$pid")
		read -r _ n dur p50 p99 errs <<<"$out"
		rate[$r,$bin]=$(awk -v n="$n" -v d="$dur" 'BEGIN{printf "%.1f", n/(d/1e6)}')
		cost[$r,$bin]=$(awk -v c="$((c1 - c0))" -v hz="$hz" -v n="$n" 'BEGIN{printf "%.3f", c/hz*1000/n}')
		printf '%-6s %-5s %10s %9s %9s %12s %6s\n' "$r" "$bin" "${rate[$r,$bin]}" "$p50" "$p99" "${cost[$r,$bin]}" "$errs"
		stop
	done
done
median() { sort -n | awk '{a[NR]=$1} END{if (NR%2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'; }
rr="" cr=""
for r in $(seq "$rounds"); do
	rr+="$(awk -v a="${rate[$r,new]}" -v b="${rate[$r,base]}" 'BEGIN{printf "%.3f", a/b}') "
	cr+="$(awk -v a="${cost[$r,new]}" -v b="${cost[$r,base]}" 'BEGIN{printf "%.3f", a/b}') "
done
echo
echo "new/base, same round (tracing ${TRACING:-off}; base $(git rev-parse --short "$base")):"
echo "  calls/s:      $rr median $(tr ' ' '\n' <<<"$rr" | grep . | median)"
echo "  CPU per call: $cr median $(tr ' ' '\n' <<<"$cr" | grep . | median)"
[ -z "$sink" ] || echo "OTLP exports the sink received: $(wc -l <"$work/exports" 2>/dev/null || echo 0)"
echo "binary size: base $(stat -c %s "$work/base") bytes, new $(stat -c %s "$work/new") bytes"
