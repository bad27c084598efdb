"""The man page (docs/lepus.1.scd) against the real binary (issue 17): every
option that `lepus --help` lists is documented in the page, and what the page
says `-t` exits with on a bad configuration is what `lepus -t` does."""
import os
import re
import subprocess
import tempfile
import unittest

from harness import BINARY

PAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "lepus.1.scd")


def help_options(help_text):
    """Options named on the option lines of --help ("  -c,--config TEXT ..."),
    each as written ("-c", "--config")."""
    options = []
    for line in help_text.splitlines():
        match = re.match(r"\s{1,4}(--?[A-Za-z0-9][-\w]*(?:,\s*--?[A-Za-z0-9][-\w]*)*)", line)
        if match:
            options += [name.strip() for name in match.group(1).split(",")]
    return options


def documented(option, page):
    """True when the page names `option` as an option: in bold (*--listen*,
    *-l, --listen*) or in running text, not as a prefix of a longer one."""
    return re.search(r"(?<![-\w])%s(?![-\w])" % re.escape(option), page) is not None


@unittest.skipUnless(BINARY, "LEPUS_BINARY is not set")
class ManPage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(PAGE, encoding="utf-8") as f:
            cls.page = f.read()
        done = subprocess.run([BINARY, "--help"], capture_output=True, text=True, timeout=10)
        assert done.returncode == 0, done.stderr
        cls.help = done.stdout

    def test_help_is_parsed(self):
        # Guards the parser of --help: if its layout changed so that no option
        # is found any more, the comparison below would pass on nothing.
        options = help_options(self.help)
        for option in ("-h", "--help", "--listen", "--config"):
            self.assertIn(option, options, self.help)
        self.assertGreater(len(options), 20)

    def test_every_option_of_help_is_in_the_page(self):
        missing = [o for o in help_options(self.help) if not documented(o, self.page)]
        self.assertEqual(missing, [], "options in `lepus --help` missing from docs/lepus.1.scd")

    def test_options_section_documents_them(self):
        # In the OPTIONS section proper, as a bold term, not only in passing.
        section = self.page.split("# OPTIONS", 1)[1].split("\n# ", 1)[0]
        terms = "\n".join(line for line in section.splitlines() if line.startswith("*"))
        missing = [o for o in help_options(self.help) if not documented(o, terms)]
        self.assertEqual(missing, [], "options without an entry in OPTIONS")

    def test_check_exit_status_is_the_documented_one(self):
        match = re.search(r"\*-t\* exits 0 when the configuration is valid and (\d) when it is not",
                          self.page)
        self.assertIsNotNone(match, "EXIT STATUS must say what -t exits with")
        documented_status = int(match.group(1))
        with tempfile.TemporaryDirectory(prefix="lepus-man-") as tmp:
            bad = os.path.join(tmp, "bad.toml")
            with open(bad, "w") as f:
                f.write('keepalive_timout = "5s"\n')  # a misspelt key
            done = subprocess.run([BINARY, "-t", "--config", bad], capture_output=True,
                                  text=True, timeout=10)
            self.assertEqual(done.returncode, documented_status, done.stderr)
            good = os.path.join(tmp, "good.toml")
            with open(good, "w") as f:
                f.write('root = "%s"\n' % tmp)
            done = subprocess.run([BINARY, "-t", "--config", good], capture_output=True,
                                  text=True, timeout=10)
            self.assertEqual(done.returncode, 0, done.stderr)

    def test_page_builds_with_scdoc(self):
        try:
            with open(PAGE, "rb") as page:
                done = subprocess.run(["scdoc"], stdin=page, capture_output=True, timeout=10)
        except FileNotFoundError:
            self.skipTest("scdoc is not installed")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn(b".SH OPTIONS", done.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
