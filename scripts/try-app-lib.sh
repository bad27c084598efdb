# scripts/try-app-lib.sh: what scripts/try-wordpress and scripts/try-app share
# (sourced, not run). Each of them installs Debian packages, starts a php-fpm
# pool of its own and lepus with a recipe copied from docs/APPLICATIONS.md,
# then checks the application with curl over https and HTTP/2, printing one
# PASS or FAIL line per check. Everything started is stopped by the EXIT trap,
# and every wait is bounded. Run as root on Debian 12; not part of scripts/test.

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work=""          # the run's temporary folder (config, socket, logs, certificate)
fpm_pid=""       # our php-fpm master
lepus_pid=""     # our lepus
port=""          # lepus's https port on 127.0.0.1
host=""          # the test host name (curl --resolve, the site's server_names)
failures=0
gaps=0           # checks of features lepus does not have yet (gap)
cleanups=()      # commands run by the EXIT trap, last registered first

log() { printf '%s\n' "$*"; }
pass() { log "PASS $*"; }
fail() { log "FAIL $*"; failures=$((failures + 1)); }
die() { log "FAIL $*"; exit 1; }

on_exit() {
  local status=$? i
  set +e
  for ((i = ${#cleanups[@]} - 1; i >= 0; i--)); do eval "${cleanups[i]}"; done
  stop_process "$lepus_pid" TERM
  stop_process "$fpm_pid" QUIT
  # The run's files (logs, config) stay for a look when something failed.
  if [ -n "$work" ] && [ "$status" -eq 0 ]; then rm -rf "$work"; fi
  exit "$status"
}

# stop_process PID SIGNAL: the signal, then up to 10 s, then SIGKILL.
stop_process() {
  local pid=$1 signal=$2 i
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill -"$signal" "$pid" 2>/dev/null
  for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  return 0
}

# setup LEPUS_BINARY HOST: root check, the temporary folder, the trap.
setup() {
  [ "$(id -u)" -eq 0 ] || die "run as root (apt-get, php-fpm pools as www-data)"
  lepus="${1:-$repo/build/release/src/server/lepus}"
  [ -x "$lepus" ] || die "no lepus binary at $lepus (build it, or pass its path)"
  host=$2
  work="$(mktemp -d /tmp/lepus-try-app.XXXXXX)"
  chmod 755 "$work"  # lepus and the pool run as www-data and reach the socket here
  trap on_exit EXIT
  trap 'exit 130' INT TERM
  log "# $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $("$lepus" --version 2>&1 | head -1), Debian $(cat /etc/debian_version)"
}

# apt_install PACKAGE...: installs what is missing, waiting up to 10 min for
# the dpkg lock (another apt may be running).
apt_install() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "# apt-get install ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -q \
      -o DPkg::Lock::Timeout=600 "${missing[@]}" >"$work/apt.log" 2>&1 ||
      { tail -20 "$work/apt.log"; die "apt-get install ${missing[*]}"; }
  fi
  for p in "$@"; do
    log "# $p $(dpkg-query -W -f='${Version}' "$p")"
  done
}

# wait_for SECONDS COMMAND...: runs COMMAND every 0.2 s until it succeeds.
wait_for() {
  local seconds=$1 i
  shift
  for ((i = 0; i < seconds * 5; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  return 1
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# make_cert: a self-signed certificate for $host, made now (one day).
make_cert() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
    -subj "/CN=$host" -addext "subjectAltName=DNS:$host" \
    -keyout "$work/site.key" -out "$work/site.pem" >/dev/null 2>&1 || die "openssl req"
  chmod 644 "$work/site.key" "$work/site.pem"
}

# start_php_fpm [php.ini lines...]: a pool of our own (user www-data) on
# $work/php.sock, whatever the system's php-fpm does.
start_php_fpm() {
  local binary line
  binary="$(command -v php-fpm8.2 || echo /usr/sbin/php-fpm8.2)"
  {
    printf '[global]\npid = %s/php-fpm.pid\nerror_log = %s/php-fpm.log\ndaemonize = no\n' "$work" "$work"
    printf '[try]\nuser = www-data\ngroup = www-data\nlisten = %s/php.sock\n' "$work"
    printf 'listen.owner = www-data\nlisten.group = www-data\nlisten.mode = 0660\n'
    printf 'pm = static\npm.max_children = 4\ncatch_workers_output = yes\n'
    # A script slower than 5 s leaves its PHP stack in slow.log (diagnosis).
    printf 'request_slowlog_timeout = 5s\nslowlog = %s/slow.log\n' "$work"
    for line in "$@"; do printf '%s\n' "$line"; done
  } >"$work/php-fpm.conf"
  "$binary" --nodaemonize --fpm-config "$work/php-fpm.conf" >>"$work/php-fpm.log" 2>&1 &
  fpm_pid=$!
  wait_for 20 test -S "$work/php.sock" || { cat "$work/php-fpm.log"; die "php-fpm did not start"; }
  log "# php-fpm pool on $work/php.sock"
}

# recipe NAME: the ```toml block after `<!-- try-app: NAME -->` in
# docs/APPLICATIONS.md, with the system's socket and certificate paths and the
# server_names replaced by this run's, and /srv/ (where the recipes keep an
# application's own files) in the run's folder.
recipe() {
  awk -v marker="<!-- try-app: $1 -->" '
    $0 == marker { found = 1; next }
    found && /^```toml/ { inside = 1; next }
    inside && /^```/ { exit }
    inside { print }' "$repo/docs/APPLICATIONS.md" |
    sed -E -e "s#unix:/run/php/php8\.2-fpm\.sock#unix:$work/php.sock#" \
      -e "s#^server_names = .*#server_names = [\"$host\"]#" \
      -e "s#\"/etc/lepus/tls/[^\"]*\\.pem\"#\"$work/site.pem\"#" \
      -e "s#\"/etc/lepus/tls/[^\"]*\\.key\"#\"$work/site.key\"#" \
      -e "s#\"/srv/#\"$work/srv/#g"
}

# start_lepus NAME: the recipe as $work/sites.d/NAME.toml, included by a main
# file that listens on https://127.0.0.1:$port; `lepus -t` first.
start_lepus() {
  mkdir -p "$work/sites.d" "$work/empty" "$work/log"
  chown www-data: "$work/log"  # lepus reopens its logs there as www-data (SIGUSR1)
  recipe "$1" >"$work/sites.d/$1.toml"
  [ -s "$work/sites.d/$1.toml" ] || die "no '<!-- try-app: $1 -->' toml block in docs/APPLICATIONS.md"
  log "# the recipe from docs/APPLICATIONS.md, as run:"
  sed 's/^/#   /' "$work/sites.d/$1.toml"
  port="$(free_port)"
  cat >"$work/lepus.toml" <<EOF
include = ["$work/sites.d/*.toml"]
listen = ["https://127.0.0.1:$port"]
threads = 2
error_log = "$work/log/error.log"
access_log = "$work/log/access.log"
EOF
  if "$lepus" -t --config "$work/lepus.toml" >"$work/lepus-t.log" 2>&1; then
    pass "lepus -t accepts the recipe"
  else
    cat "$work/lepus-t.log"
    die "lepus -t refuses the recipe"
  fi
  "$lepus" --config "$work/lepus.toml" >>"$work/lepus.out" 2>&1 &
  lepus_pid=$!
  wait_for 20 curl -s -o /dev/null --cacert "$work/site.pem" --resolve "$host:$port:127.0.0.1" \
    "https://$host:$port/" || { cat "$work/lepus.out" "$work/log/error.log"; die "lepus did not answer"; }
  log "# lepus on https://$host:$port/ (pid $lepus_pid)"
}

# fetch PATH [curl options...]: over https and HTTP/2 to our lepus; the body in
# $work/body, the headers in $work/headers; prints "STATUS HTTPVERSION TYPE".
# The cookie jar is $work/cookies, or $cookies when set. --compressed: as a
# browser, Accept-Encoding (lepus compresses PHP's pages; curl decodes them).
fetch() {
  local path=$1
  shift
  curl -sS --http2 --compressed --max-time 60 --cacert "$work/site.pem" --resolve "$host:$port:127.0.0.1" \
    -b "${cookies:-$work/cookies}" -c "${cookies:-$work/cookies}" -D "$work/headers" -o "$work/body" \
    -w '%{http_code} %{http_version} %{content_type}' "$@" "https://$host:$port$path" ||
    echo "000 - -"
}

# check WHAT STATUS PATH [GREP-PATTERN [curl options...]]: the status, HTTP/2,
# and (when not empty) the pattern in the body.
check() {
  local what=$1 want=$2 path=$3 pattern=${4:-} answer got version type
  shift 3
  [ $# -gt 0 ] && shift
  answer="$(fetch "$path" "$@")"
  read -r got version type <<<"$answer"
  if [ "$got" != "$want" ]; then
    fail "$what: GET $path answered $got (wanted $want) over HTTP/$version"
  elif [ "$version" != "2" ]; then
    fail "$what: GET $path was HTTP/$version, not HTTP/2"
  elif [ -n "$pattern" ] && ! grep -Eq -- "$pattern" "$work/body"; then
    fail "$what: GET $path is $got but the body lacks /$pattern/: $(head -c 300 "$work/body" | tr '\n' ' ')"
  else
    pass "$what: $path -> $got HTTP/2 ${type}"
  fi
}

# header NAME: the value of a header of the last fetch (first one).
header() {
  grep -i "^$1:" "$work/headers" | head -1 | cut -d' ' -f2- | tr -d '\r'
}

# gap REASON CHECK...: a check of something lepus does not have yet (REASON,
# named in docs/APPLICATIONS.md): its FAIL is printed as GAP and not counted;
# a PASS means the gap is closed and the doc should say so.
gap() {
  local reason=$1 out
  shift
  out="$("$@")"  # a subshell: its failures are not counted here
  local line
  while IFS= read -r line; do
    if [[ "$line" == "FAIL "* ]]; then
      gaps=$((gaps + 1))
      printf 'GAP (%s) %s\n' "$reason" "${line#FAIL }"
    else
      printf '%s\n' "$line"
    fi
  done <<<"$out"
}

finish() {
  if [ "$failures" -eq 0 ]; then
    if [ "$gaps" -gt 0 ]; then
      log "PASS all checks but $gaps GAP line(s): what lepus does not have yet (docs/APPLICATIONS.md)"
    else
      log "PASS all checks"
    fi
    exit 0
  fi
  if [ -n "${HOLD:-}" ]; then
    log "# HOLD: lepus stays on https://$host:$port/ for $HOLD s (curl --cacert $work/site.pem --resolve $host:$port:127.0.0.1)"
    sleep "$HOLD"
  fi
  log "# the error logs' ends:"
  tail -n 15 "$work/log/error.log" "$work/php-fpm.log" 2>/dev/null | sed 's/^/#   /'
  log "FAIL $failures check(s); the run's files are kept in $work"
  exit 1
}
