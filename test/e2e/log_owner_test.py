"""Log files after the privilege drop (issue 17): lepus started as root with
--user opens its logs as root, gives them to the user, and after a rotation
(rename, then SIGUSR1) the user creates the new files. Every line is in the
old or the new file, the ones after the rotation in the new, and every file is
the user's; a file lepus creates gets the group adm (mode 0640) when adm
exists, as Debian's rotated logs have. Issue 33: a new file root made after the
rotation (`create 0644 root root`) in a folder the user cannot write is still
reopened, by the helper that kept root for that alone, which ends with lepus.
Runs as root (the tests do); skipped otherwise."""
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


def alive(pid):
    """A process that exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def lines(path):
    with open(path) as f:
        return f.read().splitlines()


@unittest.skipUnless(BINARY, "LEPUS_BINARY is not set")
@unittest.skipUnless(os.geteuid() == 0, "needs root, to start with --user")
class LogOwner(unittest.TestCase):
    def setUp(self):
        self.nobody = pwd.getpwnam("nobody").pw_uid
        self.nogroup = grp.getgrnam("nogroup").gr_gid
        try:
            self.new_file_group = grp.getgrnam("adm").gr_gid
        except KeyError:
            self.new_file_group = self.nogroup
        self.server = Lepus(["--user", "nobody", "--group", "nogroup"])
        # The harness's scratch dir holds the logs: the user must be able to
        # create files there (systemd's LogsDirectory= does this for the package).
        os.chmod(self.server.tmp, 0o755)
        os.chown(self.server.tmp, self.nobody, self.nogroup)
        os.chmod(self.server.root, 0o755)
        self.server.write("index.html", "x", mode=0o644)

    def tearDown(self):
        if self.server.proc.returncode is None:
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
        self.assertEqual(owner(access), (self.nobody, self.new_file_group))
        self.assertEqual(owner(error), (self.nobody, self.new_file_group))
        if self.new_file_group != self.nogroup:
            self.assertEqual(os.stat(access).st_mode & 0o777, 0o640)
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
        self.assertEqual(owner(access), (self.nobody, self.new_file_group))
        old, new = lines(access + ".1"), lines(access)
        for i in range(5):
            self.assertEqual(sum("before=%d " % i in l for l in old + new), 1, i)
            self.assertEqual(sum("after=%d " % i in l for l in old + new), 1, i)
        self.assertTrue(any("?more" in l for l in new), new)
        self.assertFalse(any("before=" in l for l in new), new)
        # The error log too: its reopen line is written to the new file.
        new_error = self.wait_for(error, 1)
        self.assertEqual(owner(error), (self.nobody, self.new_file_group))
        self.assertTrue(any("SIGUSR1" in l for l in new_error), new_error)
        self.assertNotIn("Permission denied", server.stderr())

    def helper_pids(self):
        pids = []
        for task in os.listdir("/proc/%d/task" % self.server.proc.pid):
            with open("/proc/%d/task/%s/children" % (self.server.proc.pid, task)) as f:
                pids += [int(p) for p in f.read().split()]
        return pids

    def test_a_file_root_makes_after_rotation_is_reopened(self):
        server = self.server
        access, error = server.access_log, server.error_log
        helpers = self.helper_pids()
        self.assertEqual(len(helpers), 1, "one helper keeps root for the logs")
        with open("/proc/%d/status" % helpers[0]) as f:
            self.assertIn("Uid:\t0\t", f.read())
        self.assertEqual(server.get("/?before").status, 200)
        self.wait_for(access, 1)
        # The folder is root's again: only root can create the new files.
        os.chown(server.tmp, 0, 0)
        for path in (access, error):
            os.rename(path, path + ".1")
            with open(path, "w"):
                pass
            os.chmod(path, 0o644)  # logrotate's `create 0644 root root`
        server.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 20
        while not any("?after" in l for l in lines(access)):
            self.assertLess(time.monotonic(), deadline,
                            "lines stay in the rotated file: " + server.stderr())
            self.assertEqual(server.get("/?after").status, 200)
            time.sleep(0.2)
        self.assertTrue(any("SIGUSR1" in l for l in self.wait_for(error, 1)))
        # As nginx's reopen: the user gets the file, its group stays the admin's.
        self.assertEqual(owner(access), (self.nobody, 0))
        self.assertNotIn("Permission denied", server.stderr())
        server.stop(self)
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in helpers):
            self.assertLess(time.monotonic(), deadline, "the helper outlived lepus")
            time.sleep(0.05)

if __name__ == "__main__":
    unittest.main(verbosity=2)
