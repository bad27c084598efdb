"""Log files after the privilege drop (issue 17): lepus started as root with
--user opens its logs as root, gives them to the user, and after a rotation
(rename, then SIGUSR1) the user creates the new files. Every line is in the
old or the new file, the ones after the rotation in the new, and every file is
the user's. Runs as root (the tests do); skipped otherwise."""
import os
import pwd
import grp
import signal
import time
import unittest

from harness import BINARY, Lepus


def owner(path):
    st = os.stat(path)
    return st.st_uid, st.st_gid


def lines(path):
    with open(path) as f:
        return f.read().splitlines()


@unittest.skipUnless(BINARY, "LEPUS_BINARY is not set")
@unittest.skipUnless(os.geteuid() == 0, "needs root, to start with --user")
class LogOwner(unittest.TestCase):
    def setUp(self):
        self.nobody = pwd.getpwnam("nobody").pw_uid
        self.nogroup = grp.getgrnam("nogroup").gr_gid
        self.server = Lepus(["--user", "nobody", "--group", "nogroup"])
        # The harness's scratch dir holds the logs: the user must be able to
        # create files there (systemd's LogsDirectory= does this for the package).
        os.chmod(self.server.tmp, 0o755)
        os.chown(self.server.tmp, self.nobody, self.nogroup)
        os.chmod(self.server.root, 0o755)
        self.server.write("index.html", "x", mode=0o644)

    def tearDown(self):
        self.server.stop(self)

    def wait_for(self, path, count):
        """Waits until `path` holds `count` lines (the logger flushes every second)."""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if os.path.exists(path) and len(lines(path)) >= count:
                return lines(path)
            time.sleep(0.1)
        self.fail("%s never held %d lines" % (path, count))

    def test_rotated_logs_are_reopened_as_the_user(self):
        server = self.server
        access, error = server.access_log, server.error_log
        self.assertEqual(owner(access), (self.nobody, self.nogroup))
        self.assertEqual(owner(error), (self.nobody, self.nogroup))
        for i in range(5):
            self.assertEqual(server.get("/?before=%d" % i).status, 200)
        self.wait_for(access, 5)
        os.rename(access, access + ".1")
        os.rename(error, error + ".1")
        server.proc.send_signal(signal.SIGUSR1)
        # The reopen happens on the logger thread; requests from now on may land
        # in either file until it has, but none may be lost.
        for i in range(5):
            self.assertEqual(server.get("/?after=%d" % i).status, 200)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            # Requests keep coming until one made after the signal lands in the
            # new file: then the logger has reopened. (All five "after" ones may
            # have been logged to the old file before it did.)
            if os.path.exists(access) and any("?more" in l for l in lines(access)):
                break
            self.assertEqual(server.get("/?more").status, 200)
            time.sleep(0.2)
        self.assertTrue(os.path.exists(access), "SIGUSR1 did not create a new access log: " +
                        server.stderr())
        self.assertEqual(owner(access), (self.nobody, self.nogroup))
        old, new = lines(access + ".1"), lines(access)
        for i in range(5):
            self.assertEqual(sum("before=%d " % i in l for l in old + new), 1, i)
            self.assertEqual(sum("after=%d " % i in l for l in old + new), 1, i)
        self.assertTrue(any("?more" in l for l in new), new)
        self.assertFalse(any("before=" in l for l in new), new)
        # The error log too: its reopen line is written to the new file.
        new_error = self.wait_for(error, 1)
        self.assertEqual(owner(error), (self.nobody, self.nogroup))
        self.assertTrue(any("SIGUSR1" in l for l in new_error), new_error)
        self.assertNotIn("Permission denied", server.stderr())


if __name__ == "__main__":
    unittest.main(verbosity=2)
