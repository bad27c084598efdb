#!/usr/bin/env python3
"""bench/idle_memory.py [--http1] [--nginx] BINARY [COUNT]

Memory per idle connection, as docs/BENCHMARKS.md measures it for issue 38:
lepus with one reactor on a TLS listener (a P-256 certificate made here),
COUNT connections (default 3,000) each answered one request (HTTP/2 through
ALPN h2, or HTTP/1.1 with --http1) and then held open; the server's RSS
growth over them, divided by the count, 0.5 s and 2.5 s after the last one.
The client is lepus-bench's (src/tool/lepus_bench/loadgen.py, its h2-idle
scenario's connections).

With --nginx, BINARY is nginx, measured the same way: one process
(master_process off, so the one pid is the worker), http2 on the TLS
listener, TLSv1.2 and TLSv1.3 as lepus-bench configures it, access log off."""
import os
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "tool"))
from lepus_bench import loadgen  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


NGINX_CONFIG = """daemon off;
master_process off;
worker_processes 1;
pid %(work)s/nginx.pid;
error_log %(work)s/error.log warn;
worker_rlimit_nofile 20000;
events { worker_connections 10000; }
http {
    access_log off;
    keepalive_timeout 300s;
    client_body_temp_path %(work)s/body;
    proxy_temp_path %(work)s/proxy;
    fastcgi_temp_path %(work)s/fastcgi;
    uwsgi_temp_path %(work)s/uwsgi;
    scgi_temp_path %(work)s/scgi;
    server {
        listen 127.0.0.1:%(port)d ssl http2;
        ssl_certificate %(work)s/cert.pem;
        ssl_certificate_key %(work)s/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        root %(work)s/www;
    }
}
"""


def server_command(binary, work, port, nginx):
    if nginx:
        with open(work + "/nginx.conf", "w") as f:
            f.write(NGINX_CONFIG % {"work": work, "port": port})
        return [binary, "-p", work, "-c", work + "/nginx.conf", "-e", work + "/error.log"]
    return [binary, "--allow-root", "--threads", "1", "--access-log", "off", "--listen",
            "https://127.0.0.1:%d" % port, "--tls-cert", work + "/cert.pem", "--tls-key",
            work + "/key.pem", work + "/www"]


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    binary, count = args[0], int(args[1]) if len(args) > 1 else 3000
    h2 = "--http1" not in sys.argv
    nginx = "--nginx" in sys.argv
    with tempfile.TemporaryDirectory() as work:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                        "/CN=localhost", "-keyout", work + "/key.pem", "-out", work + "/cert.pem"],
                       check=True, capture_output=True)
        os.makedirs(work + "/www")
        with open(work + "/www/index.html", "w") as f:
            f.write("x" * 612)
        port = free_port()
        server = subprocess.Popen(server_command(binary, work, port, nginx),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.5)
            # A few first, so that what one-time allocations there are come before.
            warm = loadgen.IdleConnections(port, 50, tls=True, h2=h2)
            time.sleep(0.5)
            before = rss_kib(server.pid)
            held = loadgen.IdleConnections(port, count, tls=True, h2=h2)
            time.sleep(0.5)
            soon = rss_kib(server.pid)
            time.sleep(2)
            later = rss_kib(server.pid)
            n = max(1, len(held.sockets))
            print("%s: %s, %d held: %.2f KiB each after 0.5 s, %.2f KiB after 2.5 s" % (
                binary, "h2" if h2 else "HTTP/1.1", len(held.sockets), (soon - before) / n,
                (later - before) / n))
            del warm, held
        finally:
            server.terminate()
            server.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
