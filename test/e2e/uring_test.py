"""The io_uring backend (--io uring) where it differs from epoll: a refused
io_uring falls back to epoll with one line; closed connections really close
(an io_uring poll holds its own reference to the socket, so a missed cancel
would keep it open without a FIN); no descriptor is left behind."""
import ctypes
import os
import platform
import socket
import struct
import threading
import time
import unittest

import harness
from harness import Lepus, read_response

SYS_IO_URING_SETUP = 425  # x86_64 and aarch64 share the io_uring numbers


def deny_io_uring():
    """preexec_fn: a seccomp filter that makes io_uring_setup fail with EPERM,
    as Docker's default profile does."""
    libc = ctypes.CDLL(None, use_errno=True)
    audit_arch = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}[platform.machine()]
    ld_abs, jeq, ret = 0x20, 0x15, 0x06
    allow, errno_eperm = 0x7FFF0000, 0x00050000 | 1
    program = [
        (ld_abs, 0, 0, 4),                     # seccomp_data.arch
        (jeq, 1, 0, audit_arch),
        (ret, 0, 0, allow),
        (ld_abs, 0, 0, 0),                     # seccomp_data.nr
        (jeq, 0, 1, SYS_IO_URING_SETUP),
        (ret, 0, 0, errno_eperm),
        (ret, 0, 0, allow),
    ]
    code = b"".join(struct.pack("HBBI", *insn) for insn in program)
    buffer = ctypes.create_string_buffer(code)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program), ctypes.addressof(buffer))
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    if libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:  # PR_SET_SECCOMP, FILTER
        raise OSError(ctypes.get_errno(), "PR_SET_SECCOMP")


def wait_for_log(server, text, seconds=5):
    """The error log is written asynchronously: waits for `text` to show up."""
    deadline = time.monotonic() + seconds
    while text not in server.error_log_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    return server.error_log_text()


def closes_after_response(port, request):
    """Sends `request`, reads the response and then expects EOF (the FIN)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(request)
        response = read_response(s)
        return response.status, s.recv(1) == b""


class Fallback(unittest.TestCase):
    @unittest.skipUnless(platform.machine() in ("x86_64", "aarch64"), "seccomp filter for x86_64")
    def test_refused_io_uring_falls_back_to_epoll_in_one_line(self):
        server = Lepus(["--io", "uring"], preexec=deny_io_uring)
        try:
            server.write("index.html", "hi\n")
            with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
                s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                self.assertEqual(read_response(s).body, b"hi\n")
            lines = [l for l in server.stderr().splitlines() if "io_uring" in l]
            self.assertEqual(len(lines), 1, server.stderr())
            self.assertIn("using epoll", lines[0])
            self.assertIn("Operation not permitted", lines[0])
            self.assertIn(", epoll, max", wait_for_log(server, ", epoll, max"))
        finally:
            server.stop(self)


class UringServing(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Lepus(["--io", "uring", "--threads", "2"], access_log=False)
        cls.server.write("index.html", "x" * 100)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop(unittest.TestCase())

    def test_runs_on_io_uring(self):
        self.assertIn(", uring, max", wait_for_log(self.server, ", uring, max"))

    def test_every_closing_response_ends_with_a_fin(self):
        # Concurrent clients, so that closes race with wake-ups of their polls
        # (a cancel that misses leaves the socket open: no EOF, recv times out).
        failures = []

        def client(k):
            for i in range(250):
                request = (b"GET / HTTP/1.0\r\n\r\n" if i % 2 else
                           b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                try:
                    result = closes_after_response(self.server.port, request)
                except OSError as error:
                    result = repr(error)
                if result != (200, True):
                    failures.append((k, i, result))

        threads = [threading.Thread(target=client, args=(k,)) for k in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(failures, [])

    def test_no_descriptor_left_behind(self):
        fd_dir = "/proc/%d/fd" % self.server.proc.pid
        closes_after_response(self.server.port, b"GET / HTTP/1.0\r\n\r\n")
        before = len(os.listdir(fd_dir))
        sockets = [socket.create_connection(("127.0.0.1", self.server.port)) for _ in range(300)]
        for i, s in enumerate(sockets):
            if i % 3 == 0:
                s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        for s in sockets:
            s.close()
        # The reactors see the FINs; a keepalive request confirms they have run.
        for _ in range(50):
            closes_after_response(self.server.port, b"GET / HTTP/1.0\r\n\r\n")
            if len(os.listdir(fd_dir)) <= before:
                break
        self.assertLessEqual(len(os.listdir(fd_dir)), before)


if __name__ == "__main__":
    harness.main()
