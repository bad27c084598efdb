"""A real browser shows the demo site: headless Chromium loads www/ from lepus,
takes a screenshot, and the access log proves it fetched the page, its CSS and
its image."""
import os
import shutil
import subprocess
import time
import unittest

import harness
from harness import Lepus

WWW = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "www")
CHROMIUM = shutil.which("chromium")


class DemoSiteInBrowser(unittest.TestCase):
    def test_chromium_renders_the_demo_site(self):
        if not CHROMIUM:
            self.fail("chromium is not installed (scripts/test installs Debian's chromium)")
        server = Lepus(root=os.path.abspath(WWW))
        profile = harness.temp_dir(self, "chromium")
        shot = os.path.join(profile, "demo.png")
        try:
            result = subprocess.run(
                [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--user-data-dir=" + profile, "--window-size=1000,700",
                 "--screenshot=" + shot, "http://127.0.0.1:%d/" % server.port],
                capture_output=True, text=True, timeout=120)
            self.assertTrue(os.path.exists(shot), result.stderr[-2000:])
            with open(shot, "rb") as f:
                png = f.read()
            self.assertTrue(png.startswith(b"\x89PNG"))
            self.assertGreater(len(png), 10000, "the screenshot is suspiciously small")
            keep = os.environ.get("LEPUS_SCREENSHOT")
            if keep:
                shutil.copy(shot, keep)
            deadline = time.time() + 5
            wanted = {"GET / ", "GET /style.css ", "GET /lepus.svg "}
            seen = set()
            while time.time() < deadline and seen != wanted:
                time.sleep(0.2)
                text = "\n".join(server.access_lines())
                seen = {w for w in wanted if ('"%sHTTP/1.1" 200' % w) in text}
            self.assertEqual(seen, wanted, "\n".join(server.access_lines()))
        finally:
            server.stop(self)


if __name__ == "__main__":
    harness.main()
