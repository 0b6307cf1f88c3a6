#!/usr/bin/env bash
# bench-stream.sh: how fast a call's output streams to a client that reads
# as fast as it can, against the same output through `cat` to a pipe.
#
# Builds the binary, starts `toolagent serve` twice (sandbox off and on),
# each serving one `run` tool that prints `seq 1 N` (N=6000000: 46.9 MB),
# then in interleaved rounds times, on the same machine and in the same
# round:
#   cat:    seq 1 N | cat > FILE
#   stream: curl -sN -H 'Accept: application/x-ndjson' POST /v1/call > FILE
# (wall time from the request to the last byte, the call's sandbox set-up
# included). It prints the times, MB/s and the ratio stream/cat of
# throughput per round, and checks every stream: all N lines arrived, in
# order, with no gap event. On a loaded host the wall times say more about
# the load than about the daemon, so it also prints the CPU time each way
# took (cat: seq and cat; stream: the daemon with the tool it ran, and
# curl) and their ratio cat/stream: the throughput ratio a host with no
# idle core gets.
#
# In the same rounds it times the floor: internal/cmd/benchrelay, an HTTP
# server that runs the same seq and writes its output to the response as
# it reads it, with no JSON, no run and no sandbox (curl -sN to a file,
# checked byte for byte). No HTTP daemon streaming a child's output does
# less work a byte; its ratio to cat is what a stream can reach here.
#
#   scripts/bench-stream.sh [ROUNDS] [N]
#   scripts/bench-stream.sh 5 6000000        # the defaults
#
# Environment: BIN (a built binary; default: go build), RELAY (a built
# benchrelay; default: go build). Each server listens on a free port of
# 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${1:-5}
n=${2:-6000000}
[ -x /usr/bin/time ] || { echo "bench-stream: needs /usr/bin/time (Debian package time)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "bench-stream: needs python3 to check the streams" >&2; exit 1; }

work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
bin=${BIN:-$work/toolagent}
[ -n "${BIN:-}" ] || go build -o "$bin" ./cmd/toolagent
relay=${RELAY:-$work/benchrelay}
[ -n "${RELAY:-}" ] || go build -o "$relay" ./internal/cmd/benchrelay

mkdir -p "$work/tools/seq"
cat > "$work/tools/seq/TOOL.hdlp" <<HDLP
name: seq
display: seq
intent: print the numbers from 1 to $n, one a line
method: run
executor: shell
argv: [seq, "1", "$n"]
params_schema: {}
constraints:
  timeout_ms: 120000
  max_output_bytes: 65536
keywords: [seq]
author: bench
created: 2026-12-01
why: bench-stream.sh streams its output
HDLP

addrs=()
start() { # start MODE: serve on a free port; its address goes to addrs
	"$bin" serve --listen 127.0.0.1:0 --state "$work/state-$1" --tools "$work/tools" \
		--sandbox "$1" --log-level info >"$work/serve-$1.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 300); do
		a=$(sed -n 's/.*msg=listening .*addr=\(127\.0\.0\.1:[0-9]*\).*/\1/p' "$work/serve-$1.log" | head -1)
		[ -n "$a" ] && curl -sf "http://$a/readyz" >/dev/null 2>&1 && { addrs+=("$a"); return 0; }
		sleep 0.1
	done
	echo "serve did not become ready:" >&2; cat "$work/serve-$1.log" >&2; exit 1
}
start off
start on
"$relay" seq 1 "$n" >"$work/relay.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do
	raddr=$(sed -n 's/^listening \(127\.0\.0\.1:[0-9]*\)$/\1/p' "$work/relay.log")
	[ -n "$raddr" ] && break
	sleep 0.1
done
[ -n "$raddr" ] || { echo "benchrelay did not start:" >&2; cat "$work/relay.log" >&2; exit 1; }

now() { date +%s%N; }
# settle: a pause before each timed command, so that what the last one
# left running (a daemon's collection of a stream's garbage, a sandbox's
# teardown) does not fall on the next: without it the cat timed after a
# stream was slowed by that stream's end, and the stream beside it looked
# faster than it was.
settle() { sleep 0.5; }
# ticks PID: the CPU ticks of PID and its reaped children (the tools).
ticks() { awk '{print $14 + $15 + $16 + $17}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
stream() { # stream ADDR FILE
	curl -sfN -H 'Accept: application/x-ndjson' -H 'Content-Type: application/json' \
		"http://$1/v1/call" -d '{"tool":"seq"}' -o "$2"
}
# check FILE: the stream holds seq 1 N exactly and no gap.
check() {
	python3 - "$1" "$n" <<'PY'
import json, sys
want = "".join(f"{i}\n" for i in range(1, int(sys.argv[2]) + 1)).encode()
got, gaps = [], 0
for line in open(sys.argv[1], encoding="utf-8"):
    e = json.loads(line)
    if e["event"] == "stdout":
        got.append(e["data"].encode())
    gaps += e["event"] == "gap"
got = b"".join(got)
if got != want or gaps:
    sys.exit(f"stream {sys.argv[1]}: {len(got)} of {len(want)} bytes, {'equal' if got == want else 'different'}, {gaps} gap(s)")
PY
}

# warm-up: page the binary, the tool and the sandbox in
stream "${addrs[0]}" "$work/out" >/dev/null
stream "${addrs[1]}" "$work/out" >/dev/null
curl -sfN "http://$raddr/" -o "$work/out"
bytes=$(seq 1 "$n" | wc -c)
mbs() { awk -v b="$bytes" -v ns="$1" 'BEGIN{printf "%.1f", b/1e6/(ns/1e9)}'; }
printf '%-6s %-8s %9s %9s %7s %7s %9s\n' round what seconds MB/s ratio cpu_s cpu_ratio
for r in $(seq "$rounds"); do
	# the floor: the relay, beside its own cat
	settle
	t0=$(now)
	/usr/bin/time -f '%U %S' sh -c 'seq 1 "$1" | cat >"$2"' sh "$n" "$work/cat.out" 2>/dev/null
	tc=$(now)
	settle
	t1=$(now)
	curl -sfN "http://$raddr/" -o "$work/relay.out"
	t2=$(now)
	cmp -s "$work/cat.out" "$work/relay.out" || { echo "benchrelay: its output differs from seq's" >&2; exit 1; }
	c=$((tc - t0)) s=$((t2 - t1))
	printf '%-6s %-8s %9.3f %9s %7.2f\n' "$r" relay "$(awk -v x="$s" 'BEGIN{print x/1e9}')" "$(mbs "$s")" "$(awk -v c="$c" -v s="$s" 'BEGIN{print c/s}')"
	awk -v c="$c" -v s="$s" 'BEGIN{print c/s, c/s}' >>"$work/ratios-relay"
	echo "$c" >>"$work/times-cat"
	echo "$s" >>"$work/times-relay"
	for mode in off on; do
		a=${addrs[0]} pid=${pids[0]}
		[ "$mode" = off ] || a=${addrs[1]} pid=${pids[1]}
		settle
		t0=$(now)
		ccpu=$( { /usr/bin/time -f '%U %S' sh -c 'seq 1 "$1" | cat >"$2"' sh "$n" "$work/cat.out"; } 2>&1 | awk '{print $1 + $2}')
		tc=$(now)
		settle
		t1=$(now); d0=$(ticks "$pid")
		scpu=$( { /usr/bin/time -f '%U %S' curl -sfN -H 'Accept: application/x-ndjson' -H 'Content-Type: application/json' \
			"http://$a/v1/call" -d '{"tool":"seq"}' -o "$work/stream.out"; } 2>&1 | awk '{print $1 + $2}')
		t2=$(now); d1=$(ticks "$pid")
		scpu=$(awk -v c="$scpu" -v d="$((d1 - d0))" -v hz="$hz" 'BEGIN{print c + d/hz}')
		check "$work/stream.out"
		c=$((tc - t0)) s=$((t2 - t1))
		printf '%-6s %-8s %9.3f %9s %7s %7.2f\n' "$r" cat "$(awk -v x="$c" 'BEGIN{print x/1e9}')" "$(mbs "$c")" "" "$ccpu"
		printf '%-6s %-8s %9.3f %9s %7.2f %7.2f %9.2f\n' "$r" "sb-$mode" "$(awk -v x="$s" 'BEGIN{print x/1e9}')" "$(mbs "$s")" \
			"$(awk -v c="$c" -v s="$s" 'BEGIN{print c/s}')" "$scpu" "$(awk -v c="$ccpu" -v s="$scpu" 'BEGIN{print c/s}')"
		awk -v c="$c" -v s="$s" -v cc="$ccpu" -v sc="$scpu" 'BEGIN{print c/s, cc/sc}' >>"$work/ratios-$mode"
		echo "$c" >>"$work/times-cat"
		echo "$s" >>"$work/times-$mode"
	done
done
# the median and the range of each ratio over the rounds
for mode in off on relay; do
	for col in 1 2; do
		[ "$mode:$col" != relay:2 ] || continue # the relay's CPU is not measured
		sort -n -k"$col,$col" "$work/ratios-$mode" | awk -v col="$col" '{v[NR] = $col} END {
			m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			printf "%s %.2f (%.2f-%.2f)  ", col == 1 ? "ratio" : "cpu_ratio", m, v[1], v[NR]}'
	done | sed "s/^/$( [ $mode = relay ] || printf sb-)$mode median over $rounds rounds: /"
	echo
done
# The ratio of the median times: cat's own time is bimodal on a 2-core VM
# (seq and cat on one core or on two), so a round's ratio swings with
# which of cat's two speeds that round got; the medians over all rounds
# swing less.
median() { sort -n "$1" | awk '{v[NR] = $1} END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
catm=$(median "$work/times-cat")
for what in off on relay; do
	m=$(median "$work/times-$what")
	awk -v w="$( [ $what = relay ] || printf sb-)$what" -v c="$catm" -v m="$m" \
		'BEGIN{printf "%s: median %.3f s against cat %.3f s (all %d): ratio %.2f\n", w, m/1e9, c/1e9, 0, c/m}' |
		sed "s/(all 0)/(all $(wc -l <"$work/times-cat") cats)/"
done
