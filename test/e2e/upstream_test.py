"""One upstream library for FastCGI and the proxy (issue 36), against real
backends: Python HTTP backends (proxy_test.Backend, which counts the
connections it accepts) and php-fpm pools (phpfpm.PhpFpm).

Checks that a stream reset before it is answered opens no backend connection
(issue 32, item 3).
"""
import os
import socket
import struct
import unittest

import harness
from http2_test import (END_HEADERS, END_STREAM, HEADERS, PREFACE, RST_STREAM, SETTINGS, frame,
                        read_frames, request_block)
from proxy_test import Backend

CANCEL = 0x8


class ResetStreams(unittest.TestCase):
    # HEADERS then RST_STREAM for 20 streams in one write (a client, or
    # MadeYouReset, cancelling at once), then one stream that is answered:
    # only that one reaches the backend. Before, each reset stream had
    # opened (and closed) a backend connection of its own.
    def test_a_stream_reset_before_it_is_polled_opens_no_backend_connection(self):
        if harness.PROTOCOL != "h1":
            self.skipTest("raw h2c frames of its own: once is enough")
        backend = Backend("a")
        self.addCleanup(backend.stop)
        server = harness.Lepus(["--proxy", backend.address, "--threads", "1"])
        self.addCleanup(server.stop, self)
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            burst = PREFACE + frame(SETTINGS, 0, 0)
            for i in range(20):
                stream = 1 + 2 * i
                burst += frame(HEADERS, END_HEADERS | END_STREAM, stream,
                               request_block(b"/reset?mode=echo"))
                burst += frame(RST_STREAM, 0, stream, struct.pack(">I", CANCEL))
            burst += frame(HEADERS, END_HEADERS | END_STREAM, 41, request_block(b"/x?mode=echo"))
            sock.sendall(burst)
            frames = read_frames(sock, seconds=10,
                                 done=lambda fs: any(f[0] == HEADERS and f[2] == 41 for f in fs))
        self.assertTrue(any(f[0] == HEADERS and f[2] == 41 for f in frames))
        with backend.lock:
            self.assertEqual(backend.connections, 1)
            self.assertEqual([seen[1] for seen in backend.seen], ["/x?mode=echo"])


if __name__ == "__main__":
    harness.main()
