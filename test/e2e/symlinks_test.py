"""--symlinks beneath|follow|owner end to end (issue 18): a link that stays
under the root is served in every mode; one that leaves it (a folder of the site
kept on another disk, as Debian's packaged PHP applications do) is 403 under
the default `beneath`, with one error-log line naming the option, served under
`follow`, and under `owner` only when the link and its target have the same
owner (nginx's disable_symlinks if_not_owner)."""
import os
import subprocess
import time
import unittest

import harness


class Symlinks(unittest.TestCase):
    def setUp(self):
        self.tmp = harness.temp_dir(self, "symlinks")
        self.outside = os.path.join(self.tmp, "outside")
        os.makedirs(self.outside)
        with open(os.path.join(self.outside, "style.css"), "w") as f:
            f.write("body{}\n")
        with open(os.path.join(self.outside, "foreign.css"), "w") as f:
            f.write("foreign\n")

    def start(self, mode):
        server = harness.Lepus(["--symlinks", mode] if mode else [])
        self.addCleanup(server.stop, self)
        server.write("inside.txt", "inside\n")
        os.symlink("inside.txt", os.path.join(server.root, "link-in.txt"))
        os.symlink(self.outside, os.path.join(server.root, "assets"))
        os.symlink(os.path.join(self.outside, "foreign.css"),
                   os.path.join(server.root, "foreign.css"))
        return server

    def test_default_beneath_refuses_links_that_leave_the_root_and_says_why(self):
        server = self.start(None)
        self.assertEqual(server.get("/link-in.txt").body, b"inside\n")
        self.assertEqual(server.get("/assets/style.css").status, 403)
        deadline = time.monotonic() + 5  # the error log is written asynchronously
        while "--symlinks beneath" not in server.error_log_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        line = [l for l in server.error_log_text().splitlines() if "--symlinks" in l]
        self.assertEqual(len(line), 1, line)
        self.assertIn("/assets/style.css", line[0])

    def test_follow_serves_them(self):
        server = self.start("follow")
        self.assertEqual(server.get("/link-in.txt").body, b"inside\n")
        self.assertEqual(server.get("/assets/style.css").body, b"body{}\n")
        self.assertEqual(server.get("/foreign.css").body, b"foreign\n")

    @unittest.skipUnless(os.geteuid() == 0, "needs root to give files another owner")
    def test_owner_follows_only_links_of_the_targets_owner(self):
        os.chown(os.path.join(self.outside, "foreign.css"), 65534, 65534)  # nobody
        server = self.start("owner")
        self.assertEqual(server.get("/assets/style.css").body, b"body{}\n")  # root -> root
        self.assertEqual(server.get("/foreign.css").status, 403)  # root's link -> nobody's file
        # The same link owned by nobody is followed.
        os.lchown(os.path.join(server.root, "foreign.css"), 65534, 65534)
        self.assertEqual(server.get("/foreign.css").body, b"foreign\n")

    def test_a_bad_value_is_one_line_and_exit_2(self):
        done = subprocess.run([harness.BINARY, self.tmp, "--symlinks", "always"],
                              capture_output=True, text=True, timeout=10)
        self.assertEqual(done.returncode, 2)
        self.assertEqual(len(done.stderr.strip().splitlines()), 1, done.stderr)


if __name__ == "__main__":
    harness.main()
