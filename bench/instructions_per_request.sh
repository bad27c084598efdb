#!/usr/bin/env bash
# bench/instructions_per_request.sh [LEPUS_BINARY]
#
# User-space instructions per keepalive request for a small page, counted by
# callgrind (repeatable on a noisy machine, unlike wall time), for lepus and
# for nginx measured the same way. Each server runs one process/thread under
# callgrind; `ab -k -c 10` sends N1 and then N2 requests in two separate runs,
# and the difference divided by (N2 - N1) removes start-up and shutdown costs.
# SERVERS="lepus lepus-uring nginx" would add lepus on --io uring, but Debian 12's
# valgrind 3.19 does not model io_uring: lepus never starts serving under it.
# Needs: valgrind, nginx, apache2-utils (ab).
set -euo pipefail
lepus=${1:-build/release/src/server/lepus}
lepus=$(realpath "$lepus")
n1=${N1:-2000}
n2=${N2:-12000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/www"
head -c 612 /dev/zero | tr '\0' 'x' > "$work/www/index.html"

cat > "$work/nginx.conf" <<CONF
worker_processes 1;
master_process off;
daemon off;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_timeout 300s;
  keepalive_requests 1000000;
  server { listen 127.0.0.1:18231; root $work/www; }
}
CONF

# count SERVER REQUESTS: total instructions of one server run that answered REQUESTS requests.
count() {
  local server=$1 requests=$2 out="$work/cg.$1.$2"
  if [ "$server" != nginx ]; then
    local io=epoll
    [ "$server" = lepus-uring ] && io=uring
    valgrind --tool=callgrind --callgrind-out-file="$out" "$lepus" "$work/www" --listen 127.0.0.1:18230 \
      --threads 1 --no-pin --io $io --access-log off --keepalive-timeout 300s \
      --keepalive-requests 1000000 >/dev/null 2>"$work/vg.log" &
    port=18230
  else
    valgrind --tool=callgrind --callgrind-out-file="$out" nginx -c "$work/nginx.conf" -p "$work" \
      >/dev/null 2>"$work/vg.log" &
    port=18231
  fi
  local pid=$!
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.2; done
  ab -q -k -n "$requests" -c 10 "http://127.0.0.1:$port/" >/dev/null
  kill -TERM $pid; wait $pid || true
  # "summary:" is the Ir total of one file (one file per thread is summed). The
  # file repeats it as "totals:": counting both, as this script did before
  # 2026-11-24, doubled every figure (ratios were right, absolute numbers 2x).
  cat "$out"* | awk '/^summary:/ {s += $2} END {print s}'
}

for server in ${SERVERS:-lepus nginx}; do
  # Each run also answers the one readiness probe from curl.
  a=$(count $server $n1)
  b=$(count $server $n2)
  awk -v s=$server -v a="$a" -v b="$b" -v n=$((n2 - n1)) \
    'BEGIN {printf "%s: %.0f instructions per request (%d requests)\n", s, (b - a) / n, n}'
done
