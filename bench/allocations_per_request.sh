#!/usr/bin/env bash
# bench/allocations_per_request.sh [LEPUS_BINARY] [--trace N]
#
# Heap allocations per request of lepus (issue 9: zero on the keepalive static
# path), counted by the LD_PRELOAD shim test/alloc/liblepus_alloc_counter.so,
# which sees every malloc-family call and every operator new (tcmalloc's too).
# lepus runs with one reactor; after WARMUP requests, the counters are read
# before and after REQUESTS requests sent one at a time, on one keepalive
# connection (or a new connection each, for the Connection: close case), and
# the difference is divided by REQUESTS. Cases: a 612-byte file, a 100 KiB
# file (sendfile), a 404, a 304 (If-None-Match), a Range request, a new
# connection per request; each with --access-log off and with a log file.
# --trace N records the backtraces of the first N measured allocations of each
# case and prints where they come from (file:line, via addr2line).
#
# The binary must be a release build (not ASan/TSan: they replace malloc).
# The shim is built with the tests (target lepus_alloc_counter) into
# build/<preset>/test/alloc/; LEPUS_ALLOC_SHIM overrides.
# Needs: python3; addr2line (binutils) for --trace.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
lepus=build/release/src/server/lepus
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  lepus=$1
  shift
fi
lepus=$(realpath "$lepus")
shim=${LEPUS_ALLOC_SHIM:-$(dirname "$lepus")/../../test/alloc/liblepus_alloc_counter.so}
if [ ! -f "$shim" ]; then
  echo "allocations_per_request: no shim at $shim" \
    "(build it: cmake --build <dir> --target lepus_alloc_counter)" >&2
  exit 1
fi
exec python3 "$here/test/alloc/alloc_counts.py" --lepus "$lepus" --shim "$(realpath "$shim")" \
  --requests "${REQUESTS:-10000}" --warmup "${WARMUP:-1000}" "$@"
