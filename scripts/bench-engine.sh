#!/usr/bin/env bash
# bench-engine.sh — how fast and how precise is rlprobe's engine, on loopback,
# beside the usual load tools.
#
# One run measures, against the same targets:
#   1. maximum throughput against a 1-worker nginx (`return 200`), each as a
#      ratio to wrk -t1: wrk, hey and vegeta (closed loop, WRK_CONNS
#      connections), a minimal closed-loop net/http client, and `rlprobe
#      run` with its record file written (the highest steady rate with
#      under 1% late sends, found by bisection, and the rate it achieves
#      when offered wrk's);
#   2. pacing error (sent − scheduled) p50/p99/p99.9 and client CPU of
#      `rlprobe run` and `vegeta attack` at 1,000, 5,000 and 20,000
#      requests/s (vegeta's schedule is its first send + seq/rate);
#   3. race arrival spread (max − min of the server's echoed arrival, median
#      over rounds) for 20/50/100 clients in every race mode against
#      `rlprobe serve --echo-arrival`, which stamps HTTP/1 arrivals at the
#      socket (SO_TIMESTAMPNS; single-packet over h2c is stamped when its
#      handler sees END_STREAM);
#   4. the record encoder alone: the Go benchmark BenchmarkResultEncoder
#      (record/bench_test.go), one result line per op, in lines/s and
#      allocations per line, for the encoder (append), the json.Encoder
#      path it replaced (json) and Writer.WriteResult (writer). It needs
#      neither nginx nor wrk: SKIP=throughput,pacing,race,tools,profile runs it
#      alone;
#   5. (profile) a CPU profile of rlprobe run at 5000/s, the top 25
#      functions, and what the scheduler did to the event loop's thread.
# Goals to report against (issue 14): throughput ≥ 0.9 × wrk; pacing p99 ≤
# 100 µs at 5k and 20k/s at ≤ 0.3 cores at 5k/s; race spread median ≤ 150 µs
# for 20 and ≤ 600 µs for 100 clients over HTTP/1.1 (last-byte); (issue 23)
# 0 allocations per encoded line.
#
# Usage: scripts/bench-engine.sh [SECONDS (3)] [RACE_ROUNDS (20)]
# Environment: GOMAXPROCS_PROBE (unset: all cores), GOMAXPROCS_SERVE (1),
#              NGINX (/usr/sbin/nginx), WRK_CONNS (64), SKIP (list of parts
#              to skip: throughput,pacing,race,tools,encoder,profile), BASELINE (a
#              git revision: its rlprobe, built in a temporary worktree, is
#              measured too, and its encoder benchmark when it has one,
#              each measurement right after the working tree's, so that
#              both see the same load), HEY_VERSION and VEGETA_VERSION
#              (latest)
# Needs: go, python3 (to read JSON), and for parts 1-3 wrk and nginx; hey
# and vegeta are installed with `go install` into a temporary GOBIN. Not
# run by CI.
set -euo pipefail

SECS=${1:-3}
ROUNDS=${2:-20}
NGINX=${NGINX:-/usr/sbin/nginx}
CONNS=${WRK_CONNS:-64}
GMP_SERVE=${GOMAXPROCS_SERVE:-1}
SKIP=${SKIP:-}
BASELINE=${BASELINE:-}

skip() { [[ ",$SKIP," == *",$1,"* ]]; }

# net is set when a part that probes nginx or rlprobe serve runs: only
# those need wrk, nginx and the built binaries.
net=
for part in throughput pacing race profile; do skip "$part" || net=1; done

needs=(go python3)
if [ -n "$net" ]; then needs+=(wrk "$NGINX"); fi
for bin in "${needs[@]}"; do
	command -v "$bin" >/dev/null || { echo "bench-engine: $bin not found" >&2; exit 2; }
done

cd "$(dirname "$0")/.."
work=$(mktemp -d)
chmod 0755 "$work"
pids=()
base_tree=
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	if [ -n "$base_tree" ]; then git worktree remove --force "$base_tree" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 20000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
}

wait_port() {
	for _ in $(seq 200); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.05
	done
	echo "bench-engine: nothing answers on port $1" >&2
	exit 1
}

# json FILE EXPR prints a value of the JSON document in FILE (python syntax
# on d, e.g. d["pacing_error"]["p99_us"]).
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

HEY= VEGETA=
if [ -n "$net" ]; then
	echo "building rlprobe and the net/http loop..." >&2
	go build -o "$work/rlprobe" ./cmd/rlprobe
fi
if [ -n "$net" ] && ! skip tools; then
	echo "installing hey and vegeta into a temporary GOBIN..." >&2
	(cd "$work" && GOBIN="$work/bin" GOFLAGS= go install "github.com/rakyll/hey@${HEY_VERSION:-latest}" &&
		GOBIN="$work/bin" GOFLAGS= go install "github.com/tsenart/vegeta/v12@${VEGETA_VERSION:-latest}") >&2
	HEY="$work/bin/hey" VEGETA="$work/bin/vegeta"
fi
# bins: "label:binary" of every rlprobe measured; the first also serves.
bins=("work:$work/rlprobe")
if [ -n "$BASELINE" ]; then
	rev=$(git rev-parse --short "$BASELINE")
	base_tree="$work/base-tree"
	git worktree add --detach -q "$base_tree" "$rev"
	if [ -n "$net" ]; then (cd "$base_tree" && go build -o "$work/rlprobe-base" ./cmd/rlprobe); fi
	bins+=("$rev:$work/rlprobe-base")
fi

echo "machine: $(nproc) cores, $(uname -sr), $(go version | cut -d' ' -f3)"
echo "rlprobe: ${bins[*]%%:*}"

if [ -n "$net" ]; then
	mkdir -p "$work/loop"
	cat >"$work/loop/main.go" <<'EOF'
// A minimal closed-loop net/http client: C goroutines, keep-alive, for D.
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	url := os.Args[1]
	conns, _ := strconv.Atoi(os.Args[2])
	d, _ := time.ParseDuration(os.Args[3])
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
	var n atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				resp, err := client.Get(url)
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	fmt.Printf("%.0f\n", float64(n.Load())/d.Seconds())
}
EOF
	(cd "$work/loop" && go build -o "$work/nethttp-loop" main.go)

	# nginx: one worker, `return 200`.
	ngx_port=$(free_port)
	mkdir -p "$work/nginx"
	cat >"$work/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 4096; }
http {
	access_log off;
	client_body_temp_path $work/nginx;
	proxy_temp_path $work/nginx;
	fastcgi_temp_path $work/nginx;
	uwsgi_temp_path $work/nginx;
	scgi_temp_path $work/nginx;
	keepalive_requests 100000000;
	server {
		listen 127.0.0.1:$ngx_port;
		location / { return 200 "ok\n"; }
	}
}
EOF
	"$NGINX" -c "$work/nginx/nginx.conf" -p "$work/nginx" >"$work/nginx/out.log" 2>&1 &
	pids+=($!)
	wait_port "$ngx_port"
	NGX="http://127.0.0.1:$ngx_port/"
	echo "nginx: 1 worker; rlprobe GOMAXPROCS=${GOMAXPROCS_PROBE:-$(nproc) (default)}; rlprobe serve GOMAXPROCS=$GMP_SERVE"
fi
echo

# probe_run BIN NAME ARGS... runs BIN run with the bench settings, --json
# into $work/NAME.json; prints "wall_s cpu_s".
probe_run() {
	local bin=$1 name=$2
	shift 2
	local t0 t1 cpu
	t0=$(date +%s.%N)
	# shellcheck disable=SC2086
	cpu=$( { TIMEFORMAT='%U %S'; time env ${GOMAXPROCS_PROBE:+GOMAXPROCS=$GOMAXPROCS_PROBE} RLPROBE_LOOPSTAT=1 "$bin" run "$@" \
		--json -q --force --out "$work/$name.jsonl" --max-requests 1000000 --max-duration 10m \
		--max-rate 1000000/s --abort-after-errors 0 >"$work/$name.json" 2>"$work/$name.err" || true; } 2>&1 )
	t1=$(date +%s.%N)
	rm -f "$work/$name.jsonl"
	python3 -c "import sys; u,s=map(float,sys.argv[3].split()); print(f'{float(sys.argv[2])-float(sys.argv[1]):.3f} {u+s:.3f}')" "$t0" "$t1" "$cpu"
}

# loopstat ERRFILE prints "loop_ms runnable_ms preempt" from the event
# loop's RLPROBE_LOOPSTAT line in a run's stderr ("- - -" without one).
loopstat() {
	python3 -c '
import re, sys
m = re.search(r"event loop thread: ran (\S+), waited runnable (\S+) over \d+ timeslices, (\d+) involuntary", open(sys.argv[1]).read())
def ms(d):
    for unit, f in (("ms", 1), ("µs", 1e-3), ("us", 1e-3), ("ns", 1e-6), ("s", 1e3)):
        if d.endswith(unit):
            return float(d[: -len(unit)]) * f
    return float("nan")
print(f"{ms(m[1]):.0f} {ms(m[2]):.0f} {m[3]}" if m else "- - -")
' "$1"
}

# late_share NAME prints late / sent of a run (1 when nothing was sent).
late_share() { json "$work/$1.json" 'd["late"]/d["sent"] if d.get("sent") else 1'; }

if ! skip throughput; then
	echo "== 1. maximum throughput against nginx (1 worker), ${SECS}s per measurement"
	wrk_rps=$(wrk -t1 -c"$CONNS" -d"${SECS}s" "$NGX" | awk '/Requests\/sec/ {printf "%.0f", $2}')
	echo "wrk -t1 -c$CONNS:                $wrk_rps req/s"
	ratio() { python3 -c "import sys; print(f'{float(sys.argv[1])/max(1.0,float(sys.argv[2])):.2f}')" "$1" "$wrk_rps"; }
	loop_rps=$("$work/nethttp-loop" "$NGX" "$CONNS" "${SECS}s")
	echo "net/http loop, $CONNS goroutines:  $loop_rps req/s ($(ratio "$loop_rps") × wrk)"
	if [ -n "$HEY" ]; then
		hey_rps=$("$HEY" -z "${SECS}s" -c "$CONNS" "$NGX" | awk '/Requests\/sec/ {printf "%.0f", $2}')
		echo "hey -c $CONNS:                   $hey_rps req/s ($(ratio "$hey_rps") × wrk)"
		veg_rps=$(echo "GET $NGX" | "$VEGETA" attack -rate=0 -workers="$CONNS" -max-workers="$CONNS" -duration="${SECS}s" |
			"$VEGETA" report -type=json | python3 -c "import json,sys; d=json.load(sys.stdin); print(round(d['throughput']), round(100*d['success'],1))")
		echo "vegeta rate=0, $CONNS workers:     ${veg_rps% *} req/s ($(ratio "${veg_rps% *}") × wrk, ${veg_rps#* }% success)"
	fi
	# passes BIN RATE: a steady run at RATE has under 1% late sends (best of
	# two attempts, so one hiccup of a shared VM does not decide).
	passes() {
		local share
		for attempt in 1 2; do
			probe_run "$1" "tp$2-$attempt" "$NGX" --pattern steady --rate "$2/s" --duration "${SECS}s" >/dev/null
			share=$(late_share "tp$2-$attempt")
			echo "  $3 steady $2/s: $(python3 -c "import sys; print(f'{100*float(sys.argv[1]):.2f}')" "$share")% late" >&2
			if python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < 0.01 else 1)" "$share"; then return 0; fi
		done
		return 1
	}
	# Per binary: doubling from 1000/s, then bisection to within 5%; the
	# binaries take turns, so that each step of theirs sees the same load.
	declare -A lo hi next phase
	for b in "${bins[@]}"; do
		l=${b%%:*}
		lo[$l]=0
		hi[$l]=$((wrk_rps > 0 ? wrk_rps * 3 / 2 : 100000))
		next[$l]=1000
		phase[$l]=double
	done
	while :; do
		active=0
		for b in "${bins[@]}"; do
			l=${b%%:*}
			[ "${phase[$l]}" = done ] && continue
			active=1
			r=${next[$l]}
			if passes "${b#*:}" "$r" "$l"; then
				lo[$l]=$r
				if [ "${phase[$l]}" = double ] && ((2 * r < hi[$l])); then
					next[$l]=$((2 * r))
					continue
				fi
			else
				hi[$l]=$r
			fi
			if ((hi[$l] - lo[$l] <= hi[$l] / 20)); then
				phase[$l]=done
			else
				phase[$l]=bisect
				next[$l]=$(((lo[$l] + hi[$l]) / 2))
			fi
		done
		((active)) || break
	done
	for b in "${bins[@]}"; do
		l=${b%%:*}
		echo "rlprobe run [$l] (open loop, < 1% late, record written): ${lo[$l]} req/s ($(ratio "${lo[$l]}") × wrk)"
	done
	# Offered more than it can send (wrk's rate), rlprobe sends as fast as
	# it can: late sends wait for a freed connection. The achieved rate is
	# its capacity, whatever the < 1% late criterion makes of a loaded box.
	over=$((wrk_rps > 0 ? wrk_rps : 100000))
	for b in "${bins[@]}"; do
		probe_run "${b#*:}" "over-${b%%:*}" "$NGX" --pattern steady --rate "$over/s" --duration "${SECS}s" >/dev/null
		sent=$(json "$work/over-${b%%:*}.json" 'round(d.get("sent_per_s", 0))')
		echo "rlprobe run [${b%%:*}] offered $over/s, record written: sent $sent req/s ($(ratio "$sent") × wrk, $(json "$work/over-${b%%:*}.json" 'd.get("errors", 0)') errors)"
	done
	echo
fi

if ! skip pacing; then
	echo "== 2. pacing error of rlprobe run against nginx, ${SECS}s per rate"
	# loop_ms and runnable_ms: the event loop thread's CPU time and its time
	# runnable but waiting for a CPU; preempt: its involuntary context
	# switches (RLPROBE_LOOPSTAT; "-" for a binary without it).
	printf "%-10s %-10s %10s %10s %10s %10s %8s %8s %8s %12s %8s\n" "binary" "rate/s" "p50_us" "p99_us" "p999_us" "max_us" "late_%" "cores" "loop_ms" "runnable_ms" "preempt"
	for rate in 1000 5000 20000; do
		for b in "${bins[@]}"; do
			read -r wall cpu < <(probe_run "${b#*:}" "pace$rate" "$NGX" --pattern steady --rate "$rate/s" --duration "${SECS}s")
			read -r loop_ms runnable_ms preempt < <(loopstat "$work/pace$rate.err")
			printf "%-10s %-10s %10s %10s %10s %10s %8s %8s %8s %12s %8s\n" "${b%%:*}" "$rate" \
				"$(json "$work/pace$rate.json" 'd["pacing_error"]["p50_us"]')" \
				"$(json "$work/pace$rate.json" 'd["pacing_error"]["p99_us"]')" \
				"$(json "$work/pace$rate.json" 'd["pacing_error"]["p999_us"]')" \
				"$(json "$work/pace$rate.json" 'd["pacing_error"]["max_us"]')" \
				"$(json "$work/pace$rate.json" 'round(100*d["late"]/max(1,d["sent"]),2)')" \
				"$(python3 -c "import sys; print(f'{float(sys.argv[2])/float(sys.argv[1]):.2f}')" "$wall" "$cpu")" \
				"$loop_ms" "$runnable_ms" "$preempt"
		done
		if [ -n "$VEGETA" ]; then
			t0=$(date +%s.%N)
			cpu=$( { TIMEFORMAT='%U %S'; time "$VEGETA" attack -rate="$rate/s" -duration="${SECS}s" \
				<<<"GET $NGX" >"$work/veg$rate.bin"; } 2>&1 )
			t1=$(date +%s.%N)
			"$VEGETA" encode --to json <"$work/veg$rate.bin" | python3 -c '
import json, sys
rate = float(sys.argv[1])
def ns(ts):  # RFC 3339 with nanoseconds, UTC ("Z")
    import calendar, time
    base, frac = ts.rstrip("Z").split(".") if "." in ts else (ts.rstrip("Z"), "0")
    return calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) * 10**9 + int(frac.ljust(9, "0")[:9])
rs = [json.loads(l) for l in sys.stdin if l.strip()]
t = [(r["seq"], ns(r["timestamp"])) for r in rs]
t0 = min(ts - seq * 1e9 / rate for seq, ts in t)
err = sorted((ts - (t0 + seq * 1e9 / rate)) / 1000 for seq, ts in t)
q = lambda p: round(err[min(len(err) - 1, int(p * len(err)))])
late = sum(e > 1000 for e in err)
wall, (u, s) = float(sys.argv[3]) - float(sys.argv[2]), map(float, sys.argv[4].split())
name = "vegeta"
print(f"{name:<10} {int(rate):<10} {q(.5):>10} {q(.99):>10} {q(.999):>10} {round(err[-1]):>10} {100*late/len(err):>8.2f} {(u+s)/wall:>8.2f}")
' "$rate" "$t0" "$t1" "$cpu"
		fi
	done
	echo
fi

if ! skip race; then
	echo "== 3. race arrival spread against rlprobe serve --echo-arrival (HTTP/1: socket stamps), $ROUNDS rounds each"
	big=(--algorithm token-bucket --rate 1000000/s --capacity 1000000 --headers none --echo-arrival)
	h1_port=$(free_port)
	GOMAXPROCS=$GMP_SERVE "$work/rlprobe" serve "${big[@]}" --listen "127.0.0.1:$h1_port" >"$work/serve-h1.out" 2>&1 &
	pids+=($!)
	h2_port=$(free_port)
	GOMAXPROCS=$GMP_SERVE "$work/rlprobe" serve "${big[@]}" --h2c --listen "127.0.0.1:$h2_port" >"$work/serve-h2.out" 2>&1 &
	pids+=($!)
	wait_port "$h1_port"
	wait_port "$h2_port"
	printf "%-10s %-14s %8s %14s %14s %14s %12s\n" "binary" "mode" "clients" "arrival_p50_us" "arrival_max_us" "client_p50_us" "releases"
	for mode in barrier last-byte single-packet; do
		for n in 20 50 100; do
			plan="$work/race-$mode-$n.yaml"
			{
				echo "version: 1"
				echo "phases:"
				for _ in $(seq "$ROUNDS"); do
					echo "  - {pattern: race, count: 1, clients: $n, race-mode: $mode}"
					echo "  - {pause: 200ms}"
				done
			} >"$plan"
			url="http://127.0.0.1:$h1_port/"
			extra=()
			if [ "$mode" = single-packet ]; then
				url="http://127.0.0.1:$h2_port/"
				extra=(--h2c)
			fi
			for b in "${bins[@]}"; do
				probe_run "${b#*:}" "race-$mode-$n" "$url" --plan "$plan" "${extra[@]}" >/dev/null
				f="$work/race-$mode-$n.json"
				if [ ! -s "$f" ]; then
					printf "%-10s %-14s %8s   failed: %s\n" "${b%%:*}" "$mode" "$n" "$(head -c 200 "$work/race-$mode-$n.err")"
					continue
				fi
				printf "%-10s %-14s %8s %14s %14s %14s %12s\n" "${b%%:*}" "$mode" "$n" \
					"$(json "$f" 'd["race_arrival_spread"]["p50_us"]')" \
					"$(json "$f" 'd["race_arrival_spread"]["max_us"]')" \
					"$(json "$f" 'd["race_wrote_spread"]["p50_us"]')" \
					"$(json "$f" 'd["races"]')"
			done
		done
	done
	echo
fi

if ! skip encoder; then
	echo "== 4. the record encoder alone (BenchmarkResultEncoder: one result line per op), ${SECS}s per measurement"
	# encs: "label:test binary" of every tree whose record package has the
	# benchmark (a baseline from before it writes results with json.Encoder,
	# which the json path measures).
	encs=()
	for b in "${bins[@]}"; do
		l=${b%%:*}
		dir=.
		[ "$l" = work ] || dir=$base_tree
		(cd "$dir" && go test -c -o "$work/record-$l.test" ./record)
		list=$("$work/record-$l.test" -test.list '^BenchmarkResultEncoder$')
		if grep -qx BenchmarkResultEncoder <<<"$list"; then
			encs+=("$l:$work/record-$l.test")
		else
			echo "[$l] has no BenchmarkResultEncoder: it writes results with json.Encoder (the json path below)"
		fi
	done
	printf "%-10s %-8s %12s %10s %12s %10s\n" "binary" "path" "lines/s" "ns/line" "allocs/line" "B/line"
	# The trees take turns path by path, so that both see the same load.
	for path in append json writer; do
		for e in "${encs[@]}"; do
			# shellcheck disable=SC2086
			if ! out=$(env ${GOMAXPROCS_PROBE:+GOMAXPROCS=$GOMAXPROCS_PROBE} "${e#*:}" -test.run '^$' \
				-test.bench "^BenchmarkResultEncoder\$/^$path\$" -test.benchtime "${SECS}s" -test.benchmem 2>&1); then
				printf "%-10s %-8s failed: %s\n" "${e%%:*}" "$path" "$(tail -n 3 <<<"$out" | tr '\n' ' ')"
				continue
			fi
			awk -v label="${e%%:*}" '/^BenchmarkResultEncoder\// {
				name = $1; sub(/^BenchmarkResultEncoder\//, "", name); sub(/-[0-9]+$/, "", name)
				split("", m)
				for (i = 3; i < NF; i += 2) m[$(i + 1)] = $i
				printf "%-10s %-8s %12.0f %10s %12s %10s\n", label, name, m["lines/s"], m["ns/op"], m["allocs/op"], m["B/op"]
			}' <<<"$out"
		done
	done
fi

if ! skip profile; then
	echo "== 5. where the time goes: a CPU profile of rlprobe run [work] at 5000/s for ${SECS}s (RLPROBE_CPUPROFILE)"
	RLPROBE_CPUPROFILE="$work/cpu5000.prof" probe_run "$work/rlprobe" prof5000 "$NGX" --pattern steady --rate 5000/s --duration "${SECS}s" >/dev/null
	grep -h "event loop thread" "$work/prof5000.err" || true
	go tool pprof -top -nodecount 25 "$work/rlprobe" "$work/cpu5000.prof" 2>/dev/null | sed -n '4,32p'
	echo
fi
