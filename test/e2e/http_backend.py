"""An HTTP backend for the proxy tests: Python's threaded http.server on a free
loopback port, serving from a thread of its own, and a handler base that
answers HTTP/1.1 (keep-alive, as lepus's pool wants) without logging."""
import http.server
import socketserver
import threading


class Handler(http.server.BaseHTTPRequestHandler):
    """HTTP/1.1 and quiet; a test's handler adds do_GET and the like."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_body(self, body, content_type, headers=()):
        """A 200 answer of `body`, with Content-Length and then `headers`
        (name, value pairs) after its Content-Type."""
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class HttpBackend(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """Serves `handler` on 127.0.0.1 at a free port from its making until
    stop(); .address is its http:// URL, for --proxy or a location's proxy."""
    daemon_threads = True

    def __init__(self, handler):
        http.server.HTTPServer.__init__(self, ("127.0.0.1", 0), handler)
        self.address = "http://127.0.0.1:%d" % self.server_address[1]
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.shutdown()
        self.server_close()
