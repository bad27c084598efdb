#!/usr/bin/env bash
# bench/per_connection.sh [LEPUS_BINARY] [LEPUS_ARGS...]
#
# What one new connection costs lepus (issue 15), with a 612-byte page, one
# reactor, `ab -c 10` without keepalive (HTTP/1.0, a new TCP connection per
# request), beside the per-request scripts:
#   - user-space instructions: callgrind, a run of N1 and a run of N2
#     connections, the difference divided by N2 - N1 (start-up cancels out);
#   - system calls: `strace -c -f` attached to the server for N connections;
#   - voluntary context switches: summed over the server's threads from
#     /proc/PID/task/*/status before and after N connections (no strace: it
#     would add its own stops);
#   - heap allocations: see bench/allocations_per_request.sh (its "new
#     connection per request" line).
# Extra arguments go to lepus, e.g. `--accept reuseport` or `--io uring` (valgrind
# 3.19 cannot run the io_uring engine: its instruction count is then skipped).
# Needs: valgrind, strace, apache2-utils (ab), curl.
set -euo pipefail
lepus=${1:-build/release/src/server/lepus}
[ $# -gt 0 ] && shift
lepus=$(realpath "$lepus")
n=${N:-4000}
n1=${N1:-1000}
n2=${N2:-5000}
port=${PORT:-18260}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/www"
head -c 612 /dev/zero | tr '\0' 'x' > "$work/www/index.html"
url="http://127.0.0.1:$port/"

start() { # start [valgrind...]: lepus in the background, PID in $pid
  "$@" "$lepus" "$work/www" --listen "127.0.0.1:$port" --threads 1 --no-pin --access-log off \
    "${extra[@]}" >/dev/null 2>"$work/server.log" &
  pid=$!
  for _ in $(seq 100); do curl -s -o /dev/null "$url" && return; sleep 0.2; done
  echo "per_connection: lepus did not start: $(cat "$work/server.log")" >&2
  exit 1
}
stop() { kill -TERM "$pid"; wait "$pid" || true; }
switches() { cat /proc/"$pid"/task/*/status | awk '/^voluntary_ctxt_switches/ {s += $2} END {print s}'; }
extra=("$@")

instructions=skipped
if [[ " ${extra[*]} " != *" uring "* ]]; then
  count() {
    start valgrind --tool=callgrind --callgrind-out-file="$work/cg.$1"
    ab -q -n "$1" -c 10 "$url" >/dev/null
    stop
    awk '/^summary:/ {s += $2} END {print s}' "$work/cg.$1"*
  }
  a=$(count "$n1")
  b=$(count "$n2")
  instructions=$(awk -v a="$a" -v b="$b" -v n=$((n2 - n1)) 'BEGIN {printf "%.0f", (b - a) / n}')
fi

start
ab -q -n 2000 -c 10 "$url" >/dev/null # warm-up
before=$(switches)
ab -q -n "$n" -c 10 "$url" >/dev/null
after=$(switches)
strace -c -f -p "$pid" -o "$work/strace.txt" 2>/dev/null &
tracer=$!
sleep 0.5
ab -q -n "$n" -c 10 "$url" >/dev/null
sleep 0.2
kill -INT "$tracer"; wait "$tracer" 2>/dev/null || true
stop

echo "lepus ${extra[*]}: per new connection (ab -c 10, no keepalive)"
echo "  user-space instructions: $instructions"
awk -v c=$((after - before)) -v n="$n" 'BEGIN {printf "  voluntary context switches: %.2f\n", c / n}'
awk -v n="$n" '$4 ~ /^[0-9]+$/ && $NF ~ /^[a-z_0-9]+$/ && $NF != "total" {
                 if ($4 / n >= 0.005) printf "  %s %.2f\n", $NF, $4 / n; all += $4 }
               END {printf "  system calls in all: %.2f\n", all / n}' "$work/strace.txt"
