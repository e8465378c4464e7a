#!/usr/bin/env bash
# bench-serve.sh — throughput of `rlprobe serve` on loopback (memory and
# Redis backends) beside nginx limit_req, all measured with wrk in one run.
#
# Every server limits with a bucket large enough that nothing is rejected
# (the admitted path: limiter decision + rate-limit headers + a tiny body),
# keyed so that all traffic shares one key, as nginx's $binary_remote_addr
# from 127.0.0.1 does. The rounds are interleaved; the median is reported.
#
# Usage: scripts/bench-serve.sh [ROUNDS (3)] [DURATION (5s)]
# Environment: GOMAXPROCS_SERVE (1), WRK_THREADS (1), WRK_CONNS (50),
#              NGINX (/usr/sbin/nginx), REDIS_SERVER (/usr/bin/redis-server)
set -euo pipefail

ROUNDS=${1:-3}
DURATION=${2:-5s}
GMP=${GOMAXPROCS_SERVE:-1}
THREADS=${WRK_THREADS:-1}
CONNS=${WRK_CONNS:-50}
NGINX=${NGINX:-/usr/sbin/nginx}
REDIS_SERVER=${REDIS_SERVER:-/usr/bin/redis-server}

for bin in wrk "$NGINX" "$REDIS_SERVER" go; do
	command -v "$bin" >/dev/null || { echo "bench-serve: $bin not found" >&2; exit 2; }
done

cd "$(dirname "$0")/.."
work=$(mktemp -d)
chmod 0755 "$work"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# free_port prints a loopback TCP port nothing listens on.
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

# wait_port waits until 127.0.0.1:$1 accepts connections.
wait_port() {
	for _ in $(seq 200); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.05
	done
	echo "bench-serve: nothing answers on port $1" >&2
	exit 1
}

echo "building rlprobe..." >&2
go build -o "$work/rlprobe" ./cmd/rlprobe

redis_port=$(free_port)
"$REDIS_SERVER" --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
	--dir "$work" --daemonize no --loglevel warning >"$work/redis.log" 2>&1 &
pids+=($!)
wait_port "$redis_port"

bucket=(--algorithm token-bucket --rate 1000000/s --capacity 1000000 --headers draft-8)

mem_port=$(free_port)
GOMAXPROCS=$GMP "$work/rlprobe" serve "${bucket[@]}" --listen "127.0.0.1:$mem_port" >"$work/mem.out" 2>&1 &
pids+=($!)
wait_port "$mem_port"

redis_srv_port=$(free_port)
GOMAXPROCS=$GMP "$work/rlprobe" serve "${bucket[@]}" --backend redis \
	--redis "redis://127.0.0.1:$redis_port/0" --listen "127.0.0.1:$redis_srv_port" >"$work/redis-srv.out" 2>&1 &
pids+=($!)
wait_port "$redis_srv_port"

nginx_port=$(free_port)
mkdir -p "$work/nginx/logs" "$work/nginx/html"
chmod -R 0755 "$work/nginx"
printf 'ok\n' >"$work/nginx/html/ok"
chmod 0644 "$work/nginx/html/ok"
cat >"$work/nginx/nginx.conf" <<EOF
worker_processes 1;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $work/nginx/tmp-body;
    proxy_temp_path $work/nginx/tmp-proxy;
    fastcgi_temp_path $work/nginx/tmp-fastcgi;
    uwsgi_temp_path $work/nginx/tmp-uwsgi;
    scgi_temp_path $work/nginx/tmp-scgi;
    limit_req_zone \$binary_remote_addr zone=bench:1m rate=1000000r/s;
    server {
        listen 127.0.0.1:$nginx_port;
        root $work/nginx/html;
        location = /ok { limit_req zone=bench burst=1000000 nodelay; }
    }
}
EOF
"$NGINX" -p "$work/nginx/" -c "$work/nginx/nginx.conf" -e stderr \
	-g "daemon off; pid $work/nginx/nginx.pid;" >"$work/nginx.log" 2>&1 &
pids+=($!)
wait_port "$nginx_port"

# Check that each target admits and limits as configured.
for url in "http://127.0.0.1:$mem_port/" "http://127.0.0.1:$redis_srv_port/" "http://127.0.0.1:$nginx_port/ok"; do
	code=$(curl -s -o /dev/null -w '%{http_code}' "$url" 2>/dev/null || echo "?")
	[ "$code" = 200 ] || { echo "bench-serve: $url answered $code" >&2; exit 1; }
done

names=(memory redis nginx)
urls=("http://127.0.0.1:$mem_port/" "http://127.0.0.1:$redis_srv_port/" "http://127.0.0.1:$nginx_port/ok")
declare -A rps p50 p99

# Warm up each target briefly.
for i in 0 1 2; do wrk -t1 -c"$CONNS" -d1s "${urls[$i]}" >/dev/null; done

for r in $(seq "$ROUNDS"); do
	for i in 0 1 2; do
		out=$(wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency "${urls[$i]}")
		n=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
		l50=$(awk '$1 == "50%" {print $2}' <<<"$out")
		l99=$(awk '$1 == "99%" {print $2}' <<<"$out")
		non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
		if [ -n "$non2xx" ]; then echo "bench-serve: ${names[$i]}: $non2xx non-2xx answers" >&2; fi
		rps[${names[$i]}]+="$n "
		p50[${names[$i]}]+="$l50 "
		p99[${names[$i]}]+="$l99 "
		echo "round $r ${names[$i]}: $n req/s (p50 $l50, p99 $l99)" >&2
	done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo
echo "wrk -t$THREADS -c$CONNS -d$DURATION on loopback, $ROUNDS interleaved rounds, median (min-max)"
echo "rlprobe serve: GOMAXPROCS=$GMP; nginx $("$NGINX" -v 2>&1 | sed 's/.*nginx\///'): worker_processes 1; $(nproc) CPUs"
printf '%-22s %22s %12s\n' "server" "req/s" "p99 (last)"
for name in "${names[@]}"; do
	vals=${rps[$name]}
	med=$(median <<<"$vals")
	lo=$(tr ' ' '\n' <<<"$vals" | grep -v '^$' | sort -g | head -1)
	hi=$(tr ' ' '\n' <<<"$vals" | grep -v '^$' | sort -g | tail -1)
	label=$name
	case $name in
	memory) label="serve --backend memory" ;;
	redis) label="serve --backend redis" ;;
	nginx) label="nginx limit_req" ;;
	esac
	printf '%-22s %10.0f (%.0f-%.0f) %12s\n' "$label" "$med" "$lo" "$hi" "$(awk '{print $NF}' <<<"${p99[$name]}")"
done
