"""The servers under test: one shared document root, one generated config
each, started in the foreground by us and stopped by pid.

Every server gets the same settings (see the anchors file of the project's shared folder): access log
off (or on for all), keepalive idle 300 s with no practical request limit,
sendfile on where it exists, the same number of workers, one php-fpm pool.
Nothing here touches the system services or their configs.
"""
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import time

from . import procstat

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")
KNOWN_SERVERS = ("lepus", "nginx", "apache", "lighttpd", "h2o", "haproxy", "caddy")
DEFAULT_SERVERS = ("lepus", "nginx", "apache")
# lepus's event engines (`lepus --io`). With --io epoll,uring lepus takes part once
# per engine, as a server of its own: "lepus" (epoll) and "lepus-uring".
IO_BACKENDS = ("epoll", "uring")
DEFAULT_IO = "epoll"
# --lepus-before BINARY: another lepus build with the same settings, measured in the
# same rounds, so that a change lands with a before/after taken in one run.
LEPUS_BEFORE = "lepus-before"
# Program -> Debian package, for the one-line "install this" message.
PACKAGES = {"wrk": "wrk", "ab": "apache2-utils", "nginx": "nginx", "apache2": "apache2",
            "lighttpd": "lighttpd", "h2o": "h2o", "php-fpm": "php-fpm",
            "gnuplot": "gnuplot-nox", "slowhttptest": "slowhttptest", "taskset": "util-linux",
            "openssl": "openssl", "h2load": "nghttp2-client", "caddy": "caddy"}
# Programs no Debian package has: how to get them.
BUILT_HERE = {"h3load": "scripts/install-h3load (go build of bench/h3load)"}
# The servers that take part in the TLS scenarios (apache's mod_ssl is left out:
# the TLS issue compares lepus with nginx, h2o and lighttpd).
TLS_SERVERS = ("nginx", "h2o", "lighttpd", "caddy")
LIGHTTPD_OPENSSL = "/usr/lib/lighttpd/mod_openssl.so"
# A server's TLS port: its plain port plus this.
TLS_PORT_OFFSET = 100
# The proxy scenario's backend listens on the first server's port plus this.
BACKEND_PORT_OFFSET = 200
PROXY_PATH = "/proxy/hello"
BACKEND_BODY = b"proxied by the backend\n"
# The servers with a reverse proxy in lepus-bench (issue 20 compares lepus with
# nginx's proxy_pass with keepalive 32, h2o's proxy.reverse.url and haproxy).
PROXY_SERVERS = ("nginx", "h2o", "haproxy")
# Servers that only proxy (no files): they take part in the proxy scenario alone.
PROXY_ONLY = ("haproxy",)
# HTTP/3 (issue 39) on the TLS port's number, UDP: Caddy; lepus when its --help
# names quic:// listeners. Debian 12's nginx 1.22 and h2o 2.2.5 have none.
H3_SERVERS = ("caddy",)
SERVER_PROGRAMS = {"nginx": "nginx", "apache": "apache2", "lighttpd": "lighttpd", "h2o": "h2o",
                   "haproxy": "haproxy", "caddy": "caddy"}
APACHE_MODULES = "/usr/lib/apache2/modules"
BACKLOG = 4096
APACHE_THREADS = 100  # per process: enough for -c100 without queueing
PHP_CHILDREN = 8
INDEX_HTML = (
    "<!DOCTYPE html>\n<html>\n<head>\n<title>Welcome to lepus-bench!</title>\n<style>\n"
    "html { color-scheme: light dark; }\n"
    "body { width: 35em; margin: 0 auto; font-family: Tahoma, Verdana, Arial, sans-serif; }\n"
    "</style>\n</head>\n<body>\n<h1>Welcome to lepus-bench!</h1>\n"
    "<p>If you see this page, the web server under test is serving the shared\n"
    "document root of lepus-bench. The same bytes are served by every server.</p>\n\n"
    "<p>The benchmark compares lepus with nginx, apache2, lighttpd and h2o:\n"
    "same files, same settings, same cores, the same php-fpm pool.</p>\n\n"
    "<p><em>Thank you for measuring carefully.</em></p>\n</body>\n</html>\n")
HELLO_PHP = '<?php\necho "hello " . array_sum(range(1, 100));\n'
HELLO_BODY = b"hello 5050"
POST_PHP = '<?php\necho strlen(file_get_contents("php://input"));\n'
# A 20 KiB page of a typical PHP application (a table of rows), for php-gzip.
PAGE_PHP = ('<?php\necho "<!doctype html><title>rows</title><table>";\n'
            'for ($i = 0; $i < 400; $i++) echo "<tr><td>$i</td><td>row ", md5((string)$i), '
            '"</td></tr>\\n";\necho "</table>";\n')


class BenchError(Exception):
    """A failure the user can fix; main() prints it as one line."""


def lepus_name(io):
    """The server name of lepus on one event engine: lepus (epoll), lepus-uring."""
    return "lepus" if io == DEFAULT_IO else "lepus-" + io


def lepus_io(name):
    """The event engine of a lepus server name, or None for the other servers."""
    if name == "lepus":
        return DEFAULT_IO
    if name.startswith("lepus-") and name[len("lepus-"):] in IO_BACKENDS:
        return name[len("lepus-"):]
    return None


def is_lepus(name):
    """Whether a server name is a lepus (on any engine, or the --lepus-before one)."""
    return name == LEPUS_BEFORE or lepus_io(name) is not None


def find_program(name):
    """Full path of a program (also looking in /usr/sbin), or None."""
    if name == "php-fpm":
        for candidate in ("php-fpm", "php-fpm8.2", "php-fpm8.3", "php-fpm8.1"):
            path = _which(candidate)
            if path:
                return path
        return None
    return _which(name)


def _which(name):
    path = shutil.which(name)
    if path:
        return path
    # $GOPATH/bin: where scripts/install-h3load puts h3load.
    gopath = os.environ.get("GOPATH") or os.path.expanduser("~/go")
    for folder in ("/usr/sbin", "/sbin", "/usr/local/sbin", os.path.join(gopath, "bin")):
        candidate = os.path.join(folder, name)
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def require_programs(names):
    """Raises one BenchError naming every missing program and its package."""
    missing = [name for name in names if not find_program(name)]
    built = [name for name in missing if name in BUILT_HERE]
    if built:
        raise BenchError("missing %s; build with: %s" % (
            ", ".join(built), ", ".join(BUILT_HERE[name] for name in built)))
    if missing:
        packages = " ".join(sorted({PACKAGES[name] for name in missing}))
        raise BenchError("missing %s; install with: apt-get install -y %s"
                         % (", ".join(missing), packages))


def make_document_root(path):
    """Writes the files every server serves (same bytes for all)."""
    os.makedirs(path, exist_ok=True)
    files = {"index.html": INDEX_HTML.encode(), "4k.html": _filler(4096),
             "hello.php": HELLO_PHP.encode(), "post.php": POST_PHP.encode(),
             "page.php": PAGE_PHP.encode(), "100k.html": _text(100 * 1024, "html"),
             "300k.js": _text(300 * 1024, "js")}
    for name, content in files.items():
        with open(os.path.join(path, name), "wb") as f:
            f.write(content)
    for name, size in (("100k.bin", 100 * 1024), ("10m.bin", 10 * 1024 * 1024)):
        with open(os.path.join(path, name), "wb") as f:
            f.write(bytes(range(256)) * (size // 256))
    # Workers that drop root (nginx, apache, h2o) must be able to read it.
    for folder in (path, os.path.dirname(path)):
        os.chmod(folder, 0o755)
    return path


def _text(size, kind):
    """Text that compresses as real pages and scripts do (about 4:1), not a
    repeated line: the same bytes every run."""
    import random
    generator = random.Random(size)
    words = ["lepus", "server", "request", "response", "header", "value", "table", "row",
             "function", "return", "const", "let", "item", "index", "length", "data", "class",
             "style", "color", "margin", "padding", "width", "height", "display", "block"]
    out = []
    total = 0
    while total < size:
        line = " ".join(generator.choice(words) + str(generator.randrange(1000))
                        for _ in range(generator.randrange(4, 12)))
        line = ("<p>%s</p>\n" % line) if kind == "html" else ("var v%d = \"%s\";\n" % (
            generator.randrange(100000), line))
        out.append(line)
        total += len(line)
    return "".join(out).encode()[:size]


def _filler(size):
    line = b"<p>lepus-bench 4 KiB page: the same bytes for every server.</p>\n"
    return (line * (size // len(line) + 1))[:size - 1] + b"\n"


def check_port_free(port):
    """Raises BenchError if 127.0.0.1:port cannot be bound."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            raise BenchError("port %d on 127.0.0.1 is taken (choose others with --port-base)"
                             % port) from None


def render(template_name, destination, values):
    """Fills @NAME@ placeholders of a template (nginx's own $vars stay)."""
    with open(os.path.join(TEMPLATES, template_name)) as f:
        text = f.read()

    def substitute(match):
        return str(values[match.group(1)])
    with open(destination, "w") as f:
        f.write(re.sub(r"@([A-Z_]+)@", substitute, text))
    return destination


class TlsSetup:
    """One certificate and key for every server (ECDSA P-256, self-signed for
    localhost, made with the openssl command), so that all negotiate the same
    TLS 1.3 handshake and cipher (TLS_AES_256_GCM_SHA384 with wrk's and ab's
    OpenSSL, checked with `openssl s_client -brief` against each)."""

    def __init__(self, tmp):
        os.makedirs(tmp, exist_ok=True)
        self.cert = os.path.join(tmp, "cert.pem")
        self.key = os.path.join(tmp, "key.pem")
        result = subprocess.run(
            [find_program("openssl"), "req", "-x509", "-newkey", "ec", "-pkeyopt",
             "ec_paramgen_curve:prime256v1", "-nodes", "-days", "7", "-subj", "/CN=localhost",
             "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", self.key,
             "-out", self.cert], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise BenchError("openssl could not make the test certificate: %s"
                             % result.stderr.strip().splitlines()[-1:])
        os.chmod(self.key, 0o644)  # servers that drop root read it as www-data
        os.chmod(tmp, 0o755)


def supports_tls(name, lepus=None):
    """Whether a server takes part in the TLS scenarios (a lepus: if it has --tls-cert)."""
    if is_lepus(name):
        return bool(lepus) and lepus_has_flag(lepus, "--tls-cert")
    if name == "lighttpd":
        return os.path.exists(LIGHTTPD_OPENSSL)
    return name in TLS_SERVERS


def _tls_values(name, tls, tls_port):
    """The template lines of a server's TLS listener (empty without TLS)."""
    if not tls:
        return {"TLS_LINES": "", "TLS_MODULE": ""}
    if name == "nginx":
        # nginx 1.22 enables TLS 1.3 only when asked (1.23.4 made it the default).
        lines = ("listen 127.0.0.1:%d ssl http2 backlog=%d;\n        ssl_certificate %s;\n"
                 "        ssl_certificate_key %s;\n        ssl_protocols TLSv1.2 TLSv1.3;"
                 % (tls_port, BACKLOG, tls.cert, tls.key))
    elif name == "h2o":
        # h2o takes a second top-level listen (a list is refused by 2.2).
        lines = ("listen:\n  host: 127.0.0.1\n  port: %d\n  ssl:\n    certificate-file: %s\n"
                 "    key-file: %s" % (tls_port, tls.cert, tls.key))
    elif name == "lighttpd":
        lines = ('$SERVER["socket"] == "127.0.0.1:%d" {\n    ssl.engine = "enable"\n'
                 '    ssl.pemfile = "%s"\n    ssl.privkey = "%s"\n}' % (tls_port, tls.cert,
                                                                      tls.key))
    elif name == "caddy":
        lines = "https://:%d {\n\timport site\n\ttls %s %s\n}" % (tls_port, tls.cert, tls.key)
    else:
        lines = ""
    return {"TLS_LINES": lines, "TLS_MODULE": ', "mod_openssl"' if name == "lighttpd" else ""}


class Process:
    """A foreground process tree we started and stop by pid."""

    def __init__(self, name, cmd, tmp, cpus, stop_signal=signal.SIGTERM, env=None):
        self.name = name
        self.tmp = tmp
        self.stop_signal = stop_signal
        if cpus:
            cmd = [find_program("taskset") or "taskset", "-c", cpus] + cmd
        self.cmd = cmd
        self.output_path = os.path.join(tmp, "output.txt")
        with open(self.output_path, "ab") as output:
            # A new session: Ctrl-C in the terminal reaches only us, and we
            # stop the servers in order.
            self.proc = subprocess.Popen(cmd, stdout=output, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True,
                                         env=env)

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def log_tail(self, lines=5):
        """The last lines of its error log and output, for failure messages."""
        text = ""
        for name in ("error.log", "output.txt"):
            path = os.path.join(self.tmp, name)
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    text += f.read()
        tail = [line.strip() for line in text.strip().splitlines()[-lines:]]
        return " | ".join(tail) if tail else "(no output)"

    def stop(self, timeout=10):
        """Signals the tree's root, waits, then SIGKILLs whatever is left."""
        if self.proc.poll() is not None:
            return
        pids = procstat.tree_pids(self.proc.pid)
        try:
            self.proc.send_signal(self.stop_signal)
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def wait_until_connectable(process, address, what, timeout=15):
    """Waits for a TCP port or a unix socket, or raises with the log tail."""
    deadline = time.monotonic() + timeout
    while True:
        family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(1)
            try:
                s.connect(address)
                return
            except OSError:
                pass
        if not process.alive():
            raise BenchError("%s failed to start (exit %s): %s"
                             % (what, process.proc.returncode, process.log_tail()))
        if time.monotonic() > deadline:
            tail = process.log_tail()
            process.stop()
            raise BenchError("%s did not listen within %d s: %s" % (what, timeout, tail))
        time.sleep(0.05)


class Backend:
    """The proxy scenario's backend: one nginx answering from memory, shared
    by every server under test, on the generator's CPU."""

    def __init__(self, tmp, port, cpus, nofile):
        os.makedirs(tmp, exist_ok=True)
        os.chmod(tmp, 0o755)
        root = os.geteuid() == 0
        config = render("backend.conf", os.path.join(tmp, "backend.conf"), {
            "TMP": tmp, "PORT": port, "BACKLOG": BACKLOG, "NOFILE": nofile,
            "MAX_CONNECTIONS": nofile - 100, "USER_LINE": "user www-data;" if root else ""})
        self.port = port
        self.process = Process("backend nginx", [find_program("nginx"), "-p", tmp, "-c", config,
                                                 "-e", os.path.join(tmp, "error.log")],
                               tmp, cpus, stop_signal=signal.SIGQUIT)
        wait_until_connectable(self.process, ("127.0.0.1", port), "the backend nginx")

    def stop(self):
        self.process.stop()


def _proxy_values(name, backend_port):
    """The template lines of a server's reverse proxy to the backend."""
    values = {"UPSTREAM_LINES": "", "PROXY_LINES": "", "PROXY_PATH": ""}
    if not backend_port:
        return values
    if name == "nginx":
        values["UPSTREAM_LINES"] = ("upstream lepus_bench_backend {\n        server 127.0.0.1:%d;\n"
                                    "        keepalive 32;\n    }" % backend_port)
        values["PROXY_LINES"] = ("location /proxy/ {\n            proxy_pass "
                                 "http://lepus_bench_backend;\n            proxy_http_version 1.1;"
                                 "\n            proxy_set_header Connection \"\";\n        }")
    elif name == "h2o":
        values["PROXY_PATH"] = ("      /proxy:\n        proxy.reverse.url: "
                                "http://127.0.0.1:%d/proxy" % backend_port)
    return values


class PhpFpm:
    """One php-fpm master with a static pool (every server gets one, alike)."""

    def __init__(self, tmp, cpus, nofile):
        os.makedirs(tmp, exist_ok=True)
        self.socket = os.path.join(tmp, "php.sock")
        root = os.geteuid() == 0
        config = render("php-fpm.conf", os.path.join(tmp, "php-fpm.conf"), {
            "TMP": tmp, "FPM_SOCKET": self.socket, "BACKLOG": BACKLOG,
            "CHILDREN": PHP_CHILDREN, "NOFILE": nofile,
            "USER_LINE": "user = www-data\ngroup = www-data" if root else ""})
        cmd = [find_program("php-fpm"), "--nodaemonize", "--fpm-config", config]
        if root:
            cmd.append("--allow-to-run-as-root")
        self.process = Process("php-fpm", cmd, tmp, cpus, stop_signal=signal.SIGQUIT)
        wait_until_connectable(self.process, self.socket, "php-fpm")

    def stop(self):
        self.process.stop()


class Server:
    """One web server under test, listening on 127.0.0.1:port."""

    def __init__(self, name, port, root, tmp, workers, cpus, fpm_socket, access_log, nofile,
                 lepus=None, io=None, tls=None, backend_port=None):
        """lepus and io: the binary and event engine, for a lepus server; tls: a
        TlsSetup when the TLS scenarios run (a server that supports TLS then also
        listens on port + TLS_PORT_OFFSET)."""
        self.name = name
        self.port = port
        self.tls_port = None
        self.tls_note = None  # set when this server cannot run the TLS scenarios
        if tls and supports_tls(name, lepus):
            self.tls_port = port + TLS_PORT_OFFSET
        elif tls:
            self.tls_note = "no TLS listener in lepus-bench for %s" % name
        # HTTP/3 on the TLS port's number (UDP), or why not.
        self.h3_port = None
        self.h3_note = "no TLS listener" if not self.tls_port else None
        if self.tls_port and name in H3_SERVERS:
            self.h3_port = self.tls_port
        elif self.tls_port and is_lepus(name):
            if lepus_has_quic(lepus):
                self.h3_port = self.tls_port
            else:
                self.h3_note = "this lepus has no quic:// listener (its --help names none)"
        elif self.tls_port:
            self.h3_note = "%s does not speak HTTP/3 (Debian's build)" % name
        self.tmp = tmp
        self.php_note = None  # set when this server cannot run the PHP scenario
        # Set when it cannot run the proxy scenario.
        self.proxy_note = None if not backend_port else (
            None if is_lepus(name) or name in PROXY_SERVERS else
            "no reverse proxy in lepus-bench for %s" % name)
        self.fpm = None  # its own PhpFpm, when the PHP scenario runs
        os.makedirs(tmp, exist_ok=True)
        os.chmod(tmp, 0o755)
        if os.geteuid() == 0 and name in ("lighttpd", "h2o"):
            # lighttpd and h2o open their logs and pid file after dropping root.
            user = pwd.getpwnam("www-data")
            os.chown(tmp, user.pw_uid, user.pw_gid)
        log = os.path.join(tmp, "access.log") if access_log else None
        root_user = os.geteuid() == 0
        values = {"TMP": tmp, "PORT": port, "ROOT": root, "WORKERS": workers,
                  "FPM_SOCKET": fpm_socket or os.path.join(tmp, "no-php.sock"),
                  "BACKLOG": BACKLOG, "NOFILE": nofile, "MAX_CONNECTIONS": nofile - 100}
        values.update(_tls_values(name, tls if self.tls_port else None, self.tls_port))
        values.update(_proxy_values(name, backend_port))
        stop_signal = signal.SIGTERM
        if is_lepus(name):
            io = io or lepus_io(name) or DEFAULT_IO
            cmd = [lepus, root, "--listen", "127.0.0.1:%d" % port, "--threads", str(workers),
                   "--access-log", log or "off", "--error-log", os.path.join(tmp, "error.log"),
                   "--keepalive-timeout", "300s", "--keepalive-requests", "1000000000",
                   "--backlog", str(BACKLOG)]
            # epoll is the default of a lepus without --io; any other engine is asked for
            # even then, so that such a lepus fails to start and says why.
            if io != DEFAULT_IO or lepus_has_flag(lepus, "--io"):
                cmd += ["--io", io]
            if self.tls_port:
                cmd += ["--listen", "https://127.0.0.1:%d" % self.tls_port,
                        "--tls-cert", tls.cert, "--tls-key", tls.key]
            if self.h3_port:
                cmd += ["--listen", "quic://127.0.0.1:%d" % self.h3_port]
            if backend_port:
                if lepus_has_flag(lepus, "--proxy"):
                    # /proxy/ goes to the backend, as nginx's and h2o's location
                    # (--proxy alone would send / too: a directory is not a file).
                    config = os.path.join(tmp, "lepus.toml")
                    with open(config, "w") as f:
                        f.write('[[site]]\nroot = "%s"\nproxy = { address = "127.0.0.1:%d", '
                                'paths = ["/proxy/"] }\n' % (root, backend_port))
                    cmd += ["--config", config]
                else:
                    self.proxy_note = "this lepus has no --proxy flag"
            if fpm_socket:
                if lepus_has_flag(lepus, "--fastcgi"):
                    cmd += ["--fastcgi", "unix:" + fpm_socket]
                else:
                    self.php_note = "this lepus has no --fastcgi flag"
        elif name == "nginx":
            values["USER_LINE"] = "user www-data;" if root_user else ""
            values["ACCESS_LOG"] = log + " combined" if log else "off"
            config = render("nginx.conf", os.path.join(tmp, "nginx.conf"), values)
            cmd = [find_program("nginx"), "-p", tmp, "-c", config, "-e",
                   os.path.join(tmp, "error.log")]
            stop_signal = signal.SIGQUIT  # graceful: lets workers finish their responses
        elif name == "apache":
            values["USER_LINE"] = "User www-data\nGroup www-data" if root_user else ""
            values["MODULES"] = APACHE_MODULES
            values["THREADS"] = APACHE_THREADS
            values["MAX_THREADS"] = APACHE_THREADS * workers
            values["ACCESS_LOG_LINE"] = "CustomLog %s common" % log if log else ""
            config = render("apache2.conf", os.path.join(tmp, "apache2.conf"), values)
            cmd = [find_program("apache2"), "-f", config, "-DFOREGROUND"]
            stop_signal = signal.SIGTERM
        elif name == "lighttpd":
            values["USER_LINE"] = 'server.username = "www-data"' if root_user else ""
            # lighttpd forks only when max-worker > 1; 0 keeps one process.
            values["WORKERS_OR_ZERO"] = workers if workers > 1 else 0
            values["ACCESS_LOG_LINE"] = 'accesslog.filename = "%s"' % log if log else ""
            config = render("lighttpd.conf", os.path.join(tmp, "lighttpd.conf"), values)
            cmd = [find_program("lighttpd"), "-D", "-f", config]
        elif name == "haproxy":
            values["BACKEND_PORT"] = backend_port or 9  # without the proxy scenario: unused
            values["USER_LINE"] = "user haproxy" if root_user else ""
            # Two descriptors per proxied connection (client and server side).
            values["MAXCONN"] = max(100, (nofile - 200) // 2)
            config = render("haproxy.cfg", os.path.join(tmp, "haproxy.cfg"), values)
            cmd = [find_program("haproxy"), "-db", "-f", config]  # -db: foreground
        elif name == "h2o":
            values["USER_LINE"] = "user: www-data" if root_user else ""
            values["ACCESS_LOG_LINE"] = "access-log: %s" % log if log else ""
            config = render("h2o.conf", os.path.join(tmp, "h2o.conf"), values)
            cmd = [find_program("h2o"), "-c", config]
        elif name == "caddy":
            values["ACCESS_LOG_LINE"] = ("log {\n\t\toutput file %s\n\t}" % log) if log else ""
            config = render("Caddyfile", os.path.join(tmp, "Caddyfile"), values)
            cmd = [find_program("caddy"), "run", "--config", config, "--adapter", "caddyfile"]
            # Its workers are Go's threads running goroutines; its state stays in tmp.
            env = dict(os.environ, GOMAXPROCS=str(workers), HOME=tmp, XDG_DATA_HOME=tmp,
                       XDG_CONFIG_HOME=tmp)
        else:
            raise BenchError("unknown server %r" % name)
        self.process = Process(name, cmd, tmp, cpus, stop_signal=stop_signal,
                               env=env if name == "caddy" else None)
        try:
            wait_until_connectable(self.process, ("127.0.0.1", port), name)
            if self.tls_port:
                wait_until_connectable(self.process, ("127.0.0.1", self.tls_port),
                                       name + " (TLS)")
        except BenchError as error:
            if io and io != DEFAULT_IO and not lepus_has_flag(lepus, "--io"):
                raise BenchError("%s (this lepus has no --io flag: build one with the %s "
                                 "engine, or leave %s out of --io)" % (error, io, io)) from None
            raise

    @property
    def pid(self):
        return self.process.pid

    def stop(self):
        self.process.stop()


_help_texts = {}


def lepus_has_flag(lepus, flag):
    """Whether this lepus binary lists a flag in --help (--fastcgi came with issue 5,
    --io with the io_uring engine)."""
    if lepus not in _help_texts:
        try:
            _help_texts[lepus] = subprocess.run([lepus, "--help"], capture_output=True,
                                                text=True, timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired):
            _help_texts[lepus] = ""
    pattern = r"(^|[\s,\[])%s(?![\w-])" % re.escape(flag)
    return re.search(pattern, _help_texts[lepus]) is not None


def lepus_has_quic(lepus):
    """Whether this lepus serves HTTP/3: its --help names quic:// listeners (issue 39)."""
    lepus_has_flag(lepus, "--help")  # fills the cache
    return "quic://" in _help_texts.get(lepus, "")


def server_version(name, lepus):
    """A short version string for the report header (lepus: that server's binary)."""
    if is_lepus(name):
        program, flag = lepus, "--version"
    else:
        program = find_program(SERVER_PROGRAMS.get(name, name))
        flag = "version" if name == "caddy" else "-v"
    try:
        result = subprocess.run([program, flag], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    text = (result.stdout + result.stderr).strip()
    match = re.search(r"(\d+\.\d+(\.\d+)?)", text)
    return match.group(1) if match else text.splitlines()[0] if text else "?"
