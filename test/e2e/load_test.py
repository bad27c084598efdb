"""ab against the real binary: 100,000 requests without and with keepalive
complete with no failures and no non-2xx answers. Asserts correctness only;
speed is measured in docs/BENCHMARKS.md."""
import re
import shutil
import subprocess

import harness
from harness import LepusTestCase


class ApacheBench(LepusTestCase):
    ACCESS_LOG = False

    @classmethod
    def populate(cls, server):
        server.write("index.html", "x" * 612)

    def run_ab(self, *flags):
        ab = shutil.which("ab")
        if not ab:
            self.fail("ab is not installed (Debian's apache2-utils)")
        out = subprocess.run([ab, "-q", "-n", "100000", "-c", "100", "-s", "60", *flags,
                              "http://127.0.0.1:%d/" % self.server.port],
                             capture_output=True, text=True, timeout=280)
        self.assertEqual(out.returncode, 0, out.stderr)
        text = out.stdout
        self.assertRegex(text, r"Complete requests:\s+100000")
        self.assertRegex(text, r"Failed requests:\s+0\b")
        self.assertNotRegex(text, r"Non-2xx responses")
        self.assertRegex(text, r"Document Length:\s+612 bytes")
        return text

    def test_ab_new_connection_per_request(self):
        self.run_ab()

    def test_ab_keepalive(self):
        text = self.run_ab("-k")
        # Connections close after --keepalive-requests (1000), as nginx's do.
        kept = int(re.search(r"Keep-Alive requests:\s+(\d+)", text).group(1))
        self.assertGreaterEqual(kept, 99000)


if __name__ == "__main__":
    harness.main()
