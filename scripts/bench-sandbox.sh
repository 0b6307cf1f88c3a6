#!/usr/bin/env bash
# bench-sandbox.sh: the price of per-call isolation as operators run it.
#
# Builds the binary, then, in interleaved rounds, starts `toolagent serve`
# with the sandbox off and on (each call in a sandbox of its own) and
# drives `echo hello` through POST /v1/call with wrk (Debian package wrk)
# at each concurrency. Per run it prints calls/s, p50 and p99 latency and
# the host's CPU per call (busy time from /proc/stat over the calls), then
# the on/off ratio of calls/s for each round and concurrency, measured in
# the same round.
#
#   scripts/bench-sandbox.sh [ROUNDS] [SECONDS] [CONCURRENCIES...]
#   scripts/bench-sandbox.sh 6 8 8 32        # the defaults
#
# Environment: MECHANISM (auto, landlock or bubblewrap; default auto),
# PORT (default 18765), BIN (a built binary; default: go build).
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${1:-6}
secs=${2:-8}
shift $(( $# > 2 ? 2 : $# ))
concs=("$@")
[ ${#concs[@]} -gt 0 ] || concs=(8 32)
mech=${MECHANISM:-auto}
port=${PORT:-18765}
command -v wrk >/dev/null || { echo "bench-sandbox: needs wrk (apt-get install wrk)" >&2; exit 1; }

work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
bin=${BIN:-$work/toolagent}
[ -n "${BIN:-}" ] || go build -o "$bin" ./cmd/toolagent

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

busy() { awk '/^cpu /{b=0; for(i=2;i<=NF;i++) if(i!=5 && i!=6 && i!=9) b+=$i; print b}' /proc/stat; }
hz=$(getconf CLK_TCK)

pid=""
start() { # start MODE
	rm -rf "$work/state"
	"$bin" serve --listen "127.0.0.1:$port" --state "$work/state" --tools native-repo/tools \
		--sandbox "$1" --sandbox-mechanism "$mech" --max-concurrent 256 --log-level warn >"$work/serve.log" 2>&1 &
	pid=$!
	for _ in $(seq 300); do
		curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "serve did not become ready:" >&2; cat "$work/serve.log" >&2; exit 1
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }

declare -A rate
printf '%-6s %-5s %-4s %10s %9s %9s %12s %6s\n' round mode c calls/s p50_ms p99_ms cpu_ms/call errors
for r in $(seq "$rounds"); do
	for mode in off on; do
		start "$mode"
		[ "$mode" = off ] || mechanism=$(curl -s "http://127.0.0.1:$port/v1/status" | grep -o '"mechanism":"[a-z]*"' || true)
		# warm-up: the first calls page the binary and the tools in
		wrk -t2 -c8 -d2s -s "$work/post.lua" "http://127.0.0.1:$port/v1/call" >/dev/null
		for c in "${concs[@]}"; do
			b0=$(busy)
			out=$(wrk -t2 -c"$c" -d"${secs}s" -s "$work/post.lua" "http://127.0.0.1:$port/v1/call" | grep '^RESULT')
			b1=$(busy)
			read -r _ n dur p50 p99 errs <<<"$out"
			cps=$(awk -v n="$n" -v d="$dur" 'BEGIN{printf "%.1f", n/(d/1e6)}')
			cpu=$(awk -v b="$((b1 - b0))" -v hz="$hz" -v n="$n" 'BEGIN{printf "%.2f", b/hz*1000/n}')
			rate[$r,$mode,$c]=$cps
			printf '%-6s %-5s %-4s %10s %9s %9s %12s %6s\n' "$r" "$mode" "$c" "$cps" "$p50" "$p99" "$cpu" "$errs"
		done
		stop
	done
done
echo
echo "on/off calls/s, same round:"
for c in "${concs[@]}"; do
	line="c=$c:"
	for r in $(seq "$rounds"); do
		line+=" $(awk -v a="${rate[$r,on,$c]}" -v b="${rate[$r,off,$c]}" 'BEGIN{printf "%.2f", a/b}')"
	done
	echo "$line"
done
echo "sandbox on: $mechanism"
