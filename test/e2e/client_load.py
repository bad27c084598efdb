"""Clients that keep asking lepus for a page while a test reloads it: the load
of config_test's and sites_test's reloads under load."""
import threading

import harness


class ClientLoad:
    """Three client threads asking `server` for `path` on Host `host` from
    start() to stop(), for a reload under load: two on keep-alive connections of
    `per_connection` requests each, one on a new connection a request. Each
    Response goes to on_response(), and an OSError, as its repr, to .failures."""

    def __init__(self, server, host, path, on_response, per_connection):
        self.server, self.on_response, self.per_connection = server, on_response, per_connection
        self.head = "GET %s HTTP/1.1\r\nHost: %s\r\n" % (path, host)
        self.failures = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._client, args=(keepalive,))
                         for keepalive in (True, False, True)]

    def start(self):
        for thread in self._threads:
            thread.start()

    def stop(self):
        self._stop.set()
        for thread in self._threads:
            if thread.ident is not None:
                thread.join()

    def _client(self, keepalive):
        while not self._stop.is_set():
            try:
                if keepalive:
                    with self.server.connect() as s:
                        for _ in range(self.per_connection):
                            s.sendall((self.head + "\r\n").encode())
                            self.on_response(harness.read_response(s))
                else:
                    self.on_response(self.server.request(
                        self.head + "Connection: close\r\n\r\n", timeout=30))
            except OSError as e:
                self.failures.append(repr(e))
