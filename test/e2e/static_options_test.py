"""Static-file options and odd files end to end (issue 4): --dotfiles allow,
--index lists, If-Match lists, a FIFO and a socket in the root (403, and the
reactor is not blocked), and an unreadable file (403) when lepus runs as a
user that cannot read it."""
import os
import socket
import stat
import unittest

import harness
from harness import Lepus


class StaticOptions(unittest.TestCase):
    def test_dotfiles_allow(self):
        server = Lepus(["--dotfiles", "allow"])
        try:
            server.write(".well-known/security.txt", "contact")
            server.write(".env", "A=1")
            self.assertEqual(server.get("/.well-known/security.txt").body, b"contact")
            self.assertEqual(server.get("/.env").status, 200)
        finally:
            server.stop(self)

    def test_index_list_in_order(self):
        server = Lepus(["--index", "home.htm,index.html"])
        try:
            server.write("a/index.html", "index")
            server.write("b/home.htm", "home")
            server.write("b/index.html", "index")
            self.assertEqual(server.get("/a/").body, b"index")
            self.assertEqual(server.get("/b/").body, b"home")
        finally:
            server.stop(self)

    def test_if_match_lists(self):
        server = Lepus()
        try:
            server.write("f.txt", "x")
            etag = server.get("/f.txt").header("etag")
            self.assertEqual(server.get("/f.txt", ('If-Match: "a", %s' % etag,)).status, 200)
            self.assertEqual(server.get("/f.txt", ("If-Match: *",)).status, 200)
            self.assertEqual(server.get("/f.txt", ('If-Match: "a", "b"',)).status, 412)
            # If-Match uses the strong comparison: a weak tag never matches.
            self.assertEqual(server.get("/f.txt", ("If-Match: W/" + etag,)).status, 412)
        finally:
            server.stop(self)

    def test_fifo_and_socket_are_refused_without_blocking(self):
        server = Lepus(["--threads", "1"])
        try:
            os.mkfifo(os.path.join(server.root, "pipe"))
            unix = socket.socket(socket.AF_UNIX)
            unix.bind(os.path.join(server.root, "sock"))
            server.write("ok.txt", "ok")
            self.assertEqual(server.get("/pipe").status, 403)
            self.assertEqual(server.get("/sock").status, 403)
            # The only reactor is still serving: opening the FIFO did not block it.
            self.assertEqual(server.get("/ok.txt").body, b"ok")
            unix.close()
        finally:
            server.stop(self)

    @unittest.skipUnless(os.geteuid() == 0, "needs root to start lepus as another user")
    def test_unreadable_file_is_403(self):
        server = Lepus(["--user", "nobody", "--group", "nogroup"])
        try:
            os.chmod(server.tmp, 0o755)
            os.chmod(server.root, 0o755)
            server.write("public.txt", "yes", mode=0o644)
            server.write("secret.txt", "no", mode=0o600)  # owned by root
            self.assertEqual(server.get("/public.txt").body, b"yes")
            r = server.get("/secret.txt")
            self.assertEqual(r.status, 403)
            self.assertNotIn(b"no", r.body.replace(b"nginx", b""))
        finally:
            server.stop(self)


if __name__ == "__main__":
    harness.main()
