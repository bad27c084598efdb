#!/usr/bin/env bash
# bench/instructions_per_request.sh [LEPUS_BINARY]
#
# User-space instructions per keepalive request, counted by callgrind
# (repeatable on a noisy machine, unlike wall time), for lepus and for nginx
# measured the same way. Each server runs one process/thread under callgrind;
# the client sends N1 and then N2 requests in two separate runs, and the
# difference divided by (N2 - N1) removes start-up and shutdown costs.
#
# ROWS (default "h1 h2c fastcgi") picks what is measured:
#   h1       `ab -k -n N -c 10` for `/`, a 612-byte index.html, over HTTP/1.1.
#   h2c      `h2load -n N -c 10 -m 10` for the same `/`, HTTP/2 with prior
#            knowledge: ten connections of ten streams each.
#   h2       the same over TLS (ALPN h2, an ECDSA P-256 certificate this script
#            makes; TLS 1.3). Where Linux has its tls module, lepus's kTLS
#            default encrypts in the kernel, which callgrind does not count;
#            without it (as on the project's machine) lepus encrypts in user
#            space, as nginx always does here.
#   h3       `h3load -n N -c 10 -m 10` for `/` over HTTP/3 (QUIC on the h2
#            row's certificate; bench/h3load, scripts/install-h3load). lepus
#            only: nginx 1.22 has no HTTP/3 (SERVERS=lepus).
#   h3-100k  `h3load -n N -c 10 -m 1` for a 100 KiB file over HTTP/3
#            (N1/N2 default to a tenth of the others': each is ~80 packets).
#   fastcgi  `ab -k -n N -c 4` for /hello.php (`<?php echo "hello";`) through a
#            php-fpm this script starts (static pool of 4, unix socket, its own
#            config in the temp dir). php-fpm runs outside valgrind: only the
#            web server's instructions are counted.
# SERVERS (default "lepus nginx"): nginx 1.22 answers every row too (h2c on a
# plain `listen ... http2`, h2 on `listen ... ssl http2`, fastcgi_pass without
# upstream keepalive).
# SERVERS="lepus lepus-uring nginx" would add lepus on --io uring, but Debian 12's
# valgrind 3.19 does not model io_uring: lepus never starts serving under it.
# LEPUS_ARGS adds arguments to lepus's command line (word-split), e.g.
# LEPUS_ARGS="--fastcgi-keepalive on", so that one script measures either.
# Needs: valgrind, nginx, apache2-utils (ab), nghttp2-client (h2load), php-fpm,
# openssl.
set -euo pipefail
lepus=${1:-build/release/src/server/lepus}
lepus=$(realpath "$lepus")
n1=${N1:-2000}
n2=${N2:-12000}
read -ra lepus_args <<<"${LEPUS_ARGS:-}"
# Started as root, lepus would run as www-data (or nobody), which cannot read
# this script's private temporary folder or php-fpm's socket: it stays root
# here (the user it runs as changes no instruction on the request path).
if [ "$(id -u)" = 0 ] && [[ "$("$lepus" --help 2>/dev/null || true)" == *--allow-root* ]]; then
  lepus_args+=(--allow-root)
fi
work=$(mktemp -d)
php_fpm_pid=
cleanup() {
  if [ -n "$php_fpm_pid" ]; then
    kill -QUIT "$php_fpm_pid" 2>/dev/null || true
    wait "$php_fpm_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/www"
head -c 612 /dev/zero | tr '\0' 'x' >"$work/www/index.html"
echo '<?php echo "hello";' >"$work/www/hello.php"
head -c 102400 /dev/urandom >"$work/www/100k.bin"
php_socket=$work/php.sock

# The h2 row's certificate (openssl, as the e2e tests make theirs).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj /CN=localhost -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null

# Ports: lepus listens on 18230 for every row; nginx has one server per row.
declare -A nginx_port=([h1]=18231 [h2c]=18232 [fastcgi]=18233 [h2]=18234)
cat >"$work/nginx.conf" <<CONF
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
  http2_max_requests 1000000;
  server { listen 127.0.0.1:${nginx_port[h1]}; root $work/www; }
  server { listen 127.0.0.1:${nginx_port[h2c]} http2; root $work/www; }
  server {
    listen 127.0.0.1:${nginx_port[h2]} ssl http2;
    ssl_certificate $work/cert.pem;
    ssl_certificate_key $work/key.pem;
    root $work/www;
  }
  server {
    listen 127.0.0.1:${nginx_port[fastcgi]};
    root $work/www;
    location ~ \.php\$ {
      include /etc/nginx/fastcgi_params;
      fastcgi_param SCRIPT_FILENAME \$document_root\$fastcgi_script_name;
      fastcgi_pass unix:$php_socket;
    }
  }
}
CONF

# start_php_fpm: a php-fpm with a static pool of 4 on $php_socket, as
# test/e2e/phpfpm.py starts it; as root it needs --allow-to-run-as-root.
start_php_fpm() {
  local binary=${PHP_FPM:-$(command -v php-fpm8.2 || command -v php-fpm || echo /usr/sbin/php-fpm8.2)}
  cat >"$work/php-fpm.conf" <<CONF
[global]
pid = $work/php-fpm.pid
error_log = $work/php-fpm.log
daemonize = no

[bench]
listen = $php_socket
listen.mode = 0666
pm = static
pm.max_children = 4
pm.max_requests = 0
CONF
  local root_flag=()
  [ "$(id -u)" -eq 0 ] && root_flag=(--allow-to-run-as-root)
  "$binary" --nodaemonize --fpm-config "$work/php-fpm.conf" "${root_flag[@]}" \
    >"$work/php-fpm.out" 2>&1 &
  php_fpm_pid=$!
  for _ in $(seq 100); do [ -S "$php_socket" ] && return; sleep 0.1; done
  echo "php-fpm did not start: $(cat "$work/php-fpm.log" "$work/php-fpm.out" 2>/dev/null)" >&2
  exit 1
}

# load ROW PORT REQUESTS: the row's client, bounded in time as in count.
load() {
  local row=$1 port=$2 requests=$3
  case $row in
    h1) timeout 600 ab -q -k -s 60 -n "$requests" -c 10 "http://127.0.0.1:$port/" ;;
    h2c) timeout 600 h2load -n "$requests" -c 10 -m 10 -T 60 "http://127.0.0.1:$port/" ;;
    h2) timeout 600 h2load -n "$requests" -c 10 -m 10 -T 60 "https://127.0.0.1:$port/" ;;
    h3) timeout 600 h3load -n "$requests" -c 10 -m 10 -timeout 60s "https://127.0.0.1:$port/" ;;
    h3-100k) timeout 600 h3load -n "$requests" -c 10 -m 1 -timeout 60s \
      "https://127.0.0.1:$port/100k.bin" ;;
    fastcgi) timeout 600 ab -q -k -s 60 -n "$requests" -c 4 "http://127.0.0.1:$port/hello.php" ;;
  esac >"$work/load.log" || { cat "$work/load.log" >&2; return 1; }
  # A row whose responses were not all 200 measured something else.
  if grep -qE '^(Non-2xx responses|Failed requests): +[1-9]' "$work/load.log" ||
    { [[ $row == h[23]* ]] && ! grep -qE "^status codes: $requests 2xx" "$work/load.log"; }; then
    echo "$row on port $port: not every response was a 200:" >&2
    cat "$work/load.log" >&2
    return 1
  fi
}

# count ROW SERVER REQUESTS: total instructions of one server run that answered
# REQUESTS requests (and one readiness probe, the same in every run).
count() {
  local row=$1 server=$2 requests=$3 out="$work/cg.$1.$2.$3" port
  if [ "$server" != nginx ]; then
    local io=epoll row_args=() listen=127.0.0.1:18230
    [ "$server" = lepus-uring ] && io=uring
    [ "$row" = fastcgi ] && row_args=(--fastcgi "unix:$php_socket")
    if [[ $row == h2 || $row == h3* ]]; then
      listen=https://127.0.0.1:18230
      row_args=(--tls-cert "$work/cert.pem" --tls-key "$work/key.pem")
    fi
    [[ $row == h3* ]] && row_args+=(--listen quic://127.0.0.1:18230 --compress off)
    valgrind --tool=callgrind --callgrind-out-file="$out" "$lepus" "$work/www" --listen "$listen" \
      --threads 1 --no-pin --io $io --access-log off --keepalive-timeout 300s \
      --keepalive-requests 1000000 "${row_args[@]}" "${lepus_args[@]}" >/dev/null 2>"$work/vg.log" &
    port=18230
  else
    valgrind --tool=callgrind --callgrind-out-file="$out" nginx -c "$work/nginx.conf" -p "$work" \
      >/dev/null 2>"$work/vg.log" &
    port=${nginx_port[$row]}
  fi
  local pid=$! probe=() scheme=http
  [ "$row" = h2c ] && probe=(--http2-prior-knowledge)
  [ "$row" = h2 ] && probe=(-k) scheme=https
  if [[ $row == h3* ]]; then
    for _ in $(seq 100); do h3load -n 1 "https://127.0.0.1:$port/" 2>/dev/null | grep -q "^status codes: 1 2xx" && break; sleep 0.2; done
  else
    for _ in $(seq 100); do curl -s "${probe[@]}" -o /dev/null "$scheme://127.0.0.1:$port/" && break; sleep 0.2; done
  fi
  if ! load "$row" "$port" "$requests"; then
    kill -TERM $pid 2>/dev/null || true
    wait $pid || true
    echo "$server's output under valgrind:" >&2
    grep -v "^==" "$work/vg.log" | tail -5 >&2
    return 1
  fi
  kill -TERM $pid
  wait $pid || true
  # "summary:" is the Ir total of one file (one file per thread is summed). The
  # file repeats it as "totals:": counting both, as this script did before
  # 2026-11-24, doubled every figure (ratios were right, absolute numbers 2x).
  cat "$out"* | awk '/^summary:/ {s += $2} END {print s}'
}

rows=${ROWS:-h1 h2c fastcgi}
[[ " $rows " == *" fastcgi "* ]] && start_php_fpm
for row in $rows; do
  r1=$n1 r2=$n2
  [ "$row" = h3-100k ] && r1=$((n1 / 10)) r2=$((n2 / 10))
  for server in ${SERVERS:-lepus nginx}; do
    a=$(count "$row" "$server" "$r1")
    b=$(count "$row" "$server" "$r2")
    awk -v r="$row" -v s="$server" -v a="$a" -v b="$b" -v n=$((r2 - r1)) \
      'BEGIN {printf "%s %s: %.0f instructions per request (%d requests)\n", r, s, (b - a) / n, n}'
  done
done
