"""The Debian package (issues 17 and 33): scripts/package makes lepus_<version>_<arch>.deb
from the build that CTest already did (--no-build: nothing is rebuilt here),
`dpkg-deb -x` unpacks it into a scratch directory, and the test checks every
file with its mode, the conffiles, the control fields and maintainer scripts,
then runs the unpacked /usr/sbin/lepus: `-t` on the unpacked
/etc/lepus/lepus.toml and a real start serving the welcome page. The installed
config names /usr/share/lepus/www and /var/log/lepus, which do not exist on this
machine: the test runs a copy of it with those paths pointed into the scratch
directory (and 127.0.0.1:0 for the listen addresses), changing nothing else.
The logrotate snippet is run by the real logrotate on the logs of the unpacked
lepus (a copy with the scratch log directory, the current user instead of
"lepus adm", and the scratch PID file for /run/lepus/lepus.pid). Also checks
that `cmake --install --prefix` still works.

Then the real thing, when the test runs as root: `dpkg -i`, `dpkg -r` and
`dpkg -P` of the package, maintainer scripts and all, in a private mount
namespace (unshare -m) whose /etc, /usr and /var are overlays over the host's
with their writes going to the scratch directory: the host's files, users and
package database are never touched. No systemd runs there (an empty /run), the
case of a chroot or a container that the scripts must handle; triggers of other
packages (man-db) are left pending, to keep it short."""
import grp
import gzip
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
import unittest

from harness import BINARY, REAL_BINARY, read_response

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

# Every file of the package: path -> mode.
FILES = {
    "usr/sbin/lepus": 0o755,
    "usr/share/man/man8/lepus.8.gz": 0o644,
    "etc/lepus/lepus.toml": 0o644,
    "lib/systemd/system/lepus.service": 0o644,
    "etc/logrotate.d/lepus": 0o644,
    "usr/share/lepus/www/index.html": 0o644,
    "usr/share/doc/lepus/copyright": 0o644,
    "usr/share/doc/lepus/examples/lepus.toml": 0o644,
    "usr/share/doc/lepus/README.md.gz": 0o644,
    "usr/share/doc/lepus/changelog.gz": 0o644,
    "usr/share/doc/lepus/docs/ARCHITECTURE.md.gz": 0o644,
    "usr/share/lintian/overrides/lepus": 0o644,
}


def project_version():
    with open(os.path.join(REPO, "CMakeLists.txt")) as f:
        return re.search(r"project\(lepus VERSION ([0-9.]+)", f.read()).group(1)


def build_dir_of(binary):
    """build/release for build/release/src/server/lepus."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(binary))))


@unittest.skipUnless(BINARY, "LEPUS_BINARY is not set")
class DebianPackage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for tool in ("dpkg-deb", "dpkg-shlibdeps", "scdoc"):
            if not shutil.which(tool):
                print("%s is not installed (Debian packages dpkg-dev, scdoc): no package" % tool)
                raise unittest.SkipTest(tool + " is not installed")
        cls.tmp = tempfile.mkdtemp(prefix="lepus-package-")
        done = subprocess.run([os.path.join(REPO, "scripts", "package"), "--no-build", "--output",
                               cls.tmp, build_dir_of(BINARY)],
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            shutil.rmtree(cls.tmp)
            raise AssertionError("scripts/package failed:\n" + done.stdout + done.stderr)
        cls.deb = done.stdout.strip().splitlines()[-1]
        cls.root = os.path.join(cls.tmp, "root")
        subprocess.run(["dpkg-deb", "-x", cls.deb, cls.root], check=True, timeout=60)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def info(self, *what):
        return subprocess.run(["dpkg-deb", "-I", self.deb] + list(what), capture_output=True,
                              text=True, check=True, timeout=30).stdout

    def test_name_follows_the_version(self):
        arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                              check=True).stdout.strip()
        self.assertEqual(os.path.basename(self.deb),
                         "lepus_%s_%s.deb" % (project_version(), arch))

    def test_every_file_with_its_mode(self):
        for path, mode in FILES.items():
            full = os.path.join(self.root, path)
            self.assertTrue(os.path.isfile(full), path + " is missing")
            self.assertEqual(stat.S_IMODE(os.stat(full).st_mode), mode, path)
        for path in ("etc/lepus", "lib/systemd/system", "usr/sbin"):
            self.assertEqual(stat.S_IMODE(os.stat(os.path.join(self.root, path)).st_mode), 0o755)

    def test_files_are_those_of_the_repository(self):
        for installed, source in (("lib/systemd/system/lepus.service", "packaging/lepus.service"),
                                  ("etc/logrotate.d/lepus", "packaging/lepus.logrotate"),
                                  ("etc/lepus/lepus.toml", "packaging/lepus.toml"),
                                  ("usr/share/doc/lepus/copyright", "packaging/debian/copyright")):
            with open(os.path.join(self.root, installed), "rb") as a, \
                    open(os.path.join(REPO, source), "rb") as b:
                self.assertEqual(a.read(), b.read(), installed)
        # Section 8: a daemon in /usr/sbin (Debian policy §12.1).
        with gzip.open(os.path.join(self.root, "usr/share/man/man8/lepus.8.gz")) as page:
            text = page.read().decode()
        self.assertIn('.TH "lepus" "8"', text)
        self.assertIn("--listen", text.replace("\\-", "-"))
        for name, source in (("README.md.gz", "README.md"), ("changelog.gz",
                                                              "packaging/debian/changelog"),
                             ("docs/ARCHITECTURE.md.gz", "docs/ARCHITECTURE.md")):
            with gzip.open(os.path.join(self.root, "usr/share/doc/lepus", name)) as a, \
                    open(os.path.join(REPO, source), "rb") as b:
                self.assertEqual(a.read(), b.read(), name)

    def test_owned_by_root(self):
        listing = subprocess.run(["dpkg-deb", "-c", self.deb], capture_output=True, text=True,
                                 check=True).stdout.splitlines()
        self.assertGreater(len(listing), len(FILES))
        for line in listing:
            self.assertEqual(line.split()[1], "root/root", line)

    def test_conffiles(self):
        conffiles = self.info("conffiles").split()
        self.assertIn("/etc/lepus/lepus.toml", conffiles)
        self.assertIn("/etc/logrotate.d/lepus", conffiles)

    def test_control_fields(self):
        control = self.info("control")
        fields = dict(re.findall(r"^(\S+): (.*)$", control, re.M))
        self.assertEqual(fields["Package"], "lepus")
        self.assertEqual(fields["Version"], project_version())
        depends = [d.split()[0] for d in fields["Depends"].split(", ")]
        for package in ("libc6", "libstdc++6", "liburing2", "adduser"):
            self.assertIn(package, depends)
        # The sanitizer build (ctest --preset debug) links no tcmalloc: the
        # dependency follows what the packaged binary needs, as dpkg-shlibdeps says.
        # A real address (lintian: maintainer-address-is-on-localhost), the
        # changelog's, and a description of what lepus is now.
        self.assertRegex(fields["Maintainer"], r"^[^<>]+ <[^@<>]+@[^@<>]+\.[a-z]+>$")
        self.assertNotIn("localhost", fields["Maintainer"])
        changelog = subprocess.run(["dpkg-parsechangelog", "-l",
                                    os.path.join(REPO, "packaging/debian/changelog"), "-S",
                                    "Maintainer"], capture_output=True, text=True).stdout.strip()
        self.assertEqual(fields["Maintainer"], changelog)
        self.assertIn("HTTP/2", control)
        self.assertIn("backends", fields["Description"])
        self.assertNotIn("pinned", control)
        needed = subprocess.run(["readelf", "-d", REAL_BINARY], capture_output=True, text=True).stdout
        if "libtcmalloc" in needed:
            self.assertTrue(any(d.startswith("libtcmalloc-minimal") for d in depends), depends)
        else:
            self.assertFalse(any(d.startswith("libtcmalloc-minimal") for d in depends), depends)

    def test_package_build_uses_debian_hardening_flags(self):
        done = subprocess.run([os.path.join(REPO, "scripts", "package"), "--show-flags"],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        flags = dict(line.split("=", 1) for line in done.stdout.splitlines())
        for flag in ("-fstack-protector-strong", "-D_FORTIFY_SOURCE=2", "-O2",
                     "-Werror=format-security"):
            self.assertIn(flag, flags["CXXFLAGS"])
        for flag in ("-z,relro", "-z,now"):
            self.assertIn(flag, flags["LDFLAGS"])

    def test_unit_runs_in_the_group_www_data(self):
        with open(os.path.join(self.root, "lib/systemd/system/lepus.service")) as f:
            unit = f.read()
        self.assertRegex(unit, r"(?m)^SupplementaryGroups=www-data$")
        self.assertRegex(unit, r"(?m)^Documentation=man:lepus\(8\)$")

    def test_maintainer_scripts(self):
        control_dir = os.path.join(self.tmp, "control")
        subprocess.run(["dpkg-deb", "-e", self.deb, control_dir], check=True, timeout=30)
        scripts = {}
        for name in ("postinst", "prerm", "postrm"):
            path = os.path.join(control_dir, name)
            self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o755, name)
            done = subprocess.run(["sh", "-n", path], capture_output=True, text=True)
            self.assertEqual(done.returncode, 0, name + ": " + done.stderr)
            with open(path) as f:
                scripts[name] = f.read()
        self.assertRegex(scripts["postinst"], r"adduser --system --group --no-create-home")
        self.assertIn("install -d -o lepus -g lepus -m 0755 /var/log/lepus", scripts["postinst"])
        # Stopping and reloading only when systemd runs: a chroot has none.
        for name in ("postinst", "prerm"):
            self.assertIn("[ -d /run/systemd/system ]", scripts[name], name)
        self.assertIn("deb-systemd-invoke stop lepus.service", scripts["prerm"])
        self.assertIn("deb-systemd-helper purge lepus.service", scripts["postrm"])

    def scratch_config(self, listen=None):
        """The installed config with its host paths pointed into the scratch dir."""
        logs = os.path.join(self.tmp, "var-log-lepus")
        os.makedirs(logs, exist_ok=True)
        with open(os.path.join(self.root, "etc/lepus/lepus.toml")) as f:
            text = f.read()
        self.assertIn('"/usr/share/lepus/www"', text)
        self.assertIn('"/var/log/lepus/access.log"', text)
        text = text.replace("/usr/share/lepus/www", os.path.join(self.root, "usr/share/lepus/www"))
        text = text.replace("/var/log/lepus", logs)
        self.assertIn('pid_file = "/run/lepus/lepus.pid"', text)
        text = text.replace("/run/lepus", self.tmp)
        # The unit starts lepus as the user lepus; started here as root it
        # would switch to www-data (issue 33), who cannot read the scratch dir.
        if os.geteuid() == 0:
            text += "allow_root = true\n"
        if listen:
            text, count = re.subn(r"^listen = .*$", 'listen = ["%s"]' % listen, text, flags=re.M)
            self.assertEqual(count, 1)
        path = os.path.join(self.tmp, "lepus.toml")
        with open(path, "w") as f:
            f.write(text)
        return path, logs

    def test_installed_binary_accepts_the_installed_config(self):
        lepus = os.path.join(self.root, "usr/sbin/lepus")
        config, _ = self.scratch_config()
        done = subprocess.run([lepus, "-t", "--config", config], capture_output=True, text=True,
                              timeout=30)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        version = subprocess.run([lepus, "--version"], capture_output=True, text=True, timeout=30)
        self.assertIn(project_version(), version.stdout)

    def start_installed(self):
        """The unpacked lepus on the scratch copy of the installed config:
        (process, port, log directory)."""
        config, logs = self.scratch_config(listen="127.0.0.1:0")
        proc = subprocess.Popen([os.path.join(self.root, "usr/sbin/lepus"), "--config", config],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        if not match:
            proc.kill()
            self.fail("lepus did not start: %r %s" % (line, proc.communicate()[1]))
        return proc, int(match.group(1)), logs

    def stop_installed(self, proc):
        proc.terminate()
        _, stderr = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 0, stderr)

    @staticmethod
    def get(port, path):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
                      % path.encode())
            return read_response(s)

    def test_installed_binary_serves_the_welcome_page(self):
        proc, port, logs = self.start_installed()
        try:
            response = self.get(port, "/")
            self.assertEqual(response.status, 200)
            self.assertIn(b"lepus works", response.body)
        finally:
            self.stop_installed(proc)
        with open(os.path.join(logs, "access.log")) as f:
            self.assertIn('"GET / HTTP/1.1" 200', f.read())

    def wait_for_lines(self, path, wanted):
        """Waits (up to 10 s) until the file holds every line in `wanted`."""
        deadline = time.monotonic() + 10
        while True:
            with open(path) as f:
                text = f.read()
            if all(w in text for w in wanted) or time.monotonic() > deadline:
                return text
            time.sleep(0.1)

    @staticmethod
    def wait_for_open_file(pid, path):
        """Waits (up to 10 s) until process `pid` holds `path` open: after a
        rotation, until it has reopened its log (the signal that asks it to is
        answered after `lepus -s reopen` returns)."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            held = set()
            for fd in os.listdir("/proc/%d/fd" % pid):
                try:
                    held.add(os.readlink("/proc/%d/fd/%s" % (pid, fd)))
                except OSError:
                    pass
            if path in held:
                return
            time.sleep(0.05)

    def test_logrotate_snippet_rotates_without_losing_a_line(self):
        if not shutil.which("logrotate"):
            print("logrotate is not installed (Debian package logrotate): snippet not run")
            self.skipTest("logrotate is not installed")
        proc, port, logs = self.start_installed()
        try:
            with open(os.path.join(self.root, "etc/logrotate.d/lepus")) as f:
                snippet = f.read()
            user = pwd.getpwuid(os.getuid()).pw_name
            group = grp.getgrgid(os.getgid()).gr_name
            for old, new in (("/var/log/lepus/*.log {", logs + "/*.log {"),
                             ("create 0640 lepus adm", "create 0640 %s %s" % (user, group)),
                             ("/run/lepus/lepus.pid", os.path.join(self.tmp, "lepus.pid")),
                             ("/usr/sbin/lepus", os.path.join(self.root, "usr/sbin/lepus"))):
                self.assertEqual(snippet.count(old), 2 if old.startswith("/run") else 1, old)
                snippet = snippet.replace(old, new)
            config = os.path.join(self.tmp, "logrotate.conf")
            with open(config, "w") as f:
                f.write(snippet)
            access_log = os.path.join(logs, "access.log")
            before = ["GET /?before=%d " % i for i in range(3)]
            after = ["GET /?after=%d " % i for i in range(3)]
            for line in before:
                self.assertEqual(self.get(port, line.split()[1]).status, 200)
            self.wait_for_lines(access_log, before)

            done = subprocess.run(["logrotate", "-f", "-s", os.path.join(self.tmp, "state"),
                                   config], capture_output=True, text=True, timeout=60)
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
            self.assertEqual(stat.S_IMODE(os.stat(access_log).st_mode), 0o640, "create 0640")
            # SIGUSR1 makes lepus reopen access.log; lines sent after that go there.
            self.wait_for_lines(access_log + ".1", before)
            self.wait_for_open_file(proc.pid, os.path.realpath(access_log))
            for line in after:
                self.assertEqual(self.get(port, line.split()[1]).status, 200)
            self.wait_for_lines(access_log, after)
        finally:
            self.stop_installed(proc)
        with open(access_log + ".1") as f:
            rotated = f.read()
        with open(access_log) as f:
            current = f.read()
        for line in before:
            self.assertEqual(rotated.count(line), 1, line)
            self.assertNotIn(line, current)
        for line in after:
            self.assertEqual(current.count(line), 1, line)
            self.assertNotIn(line, rotated)

    def test_dpkg_install_remove_purge_in_a_private_namespace(self):
        if os.geteuid() != 0 or not shutil.which("unshare"):
            print("not root or no unshare: dpkg -i in a private mount namespace not run")
            self.skipTest("needs root and unshare")
        overlays = os.path.join(self.tmp, "overlays")
        for top in ("etc", "usr", "var"):
            for part in ("upper", "work"):
                os.makedirs(os.path.join(overlays, top, part))
        # Each fact is printed as "phase.key=value"; the assertions are below.
        script = """
mount --make-rprivate / || exit 3
for top in etc usr var; do
  mount -t overlay overlay -o lowerdir=/$top,upperdir=%(o)s/$top/upper,workdir=%(o)s/$top/work \\
    /$top || exit 3
done
# An empty /run: as in a chroot, no systemd to talk to, even on a host that has one.
mount -t tmpfs tmpfs /run || exit 3
fact() { echo "$1=$2"; }
dpkg -i --no-triggers %(deb)s >%(o)s/install.out 2>&1 || { cat %(o)s/install.out >&2; exit 1; }
fact install.said "$(grep -c 'installed, but not started: systemd is not running' %(o)s/install.out)"
fact install.how "$(grep -c 'lepus --config /etc/lepus/lepus.toml --user lepus' %(o)s/install.out)"
fact install.status "$(dpkg-query -W -f='${Status}' lepus)"
fact install.user "$(getent passwd lepus)"
fact install.logs "$(stat -c %%U:%%G:%%a /var/log/lepus)"
fact install.enabled "$(readlink /etc/systemd/system/multi-user.target.wants/lepus.service)"
check=$(setpriv --reuid=lepus --regid=lepus --init-groups /usr/sbin/lepus -t \\
  --config /etc/lepus/lepus.toml 2>&1)
status=$?
fact install.check "$(echo $check) exit $status"
echo '# changed by the administrator' >>/etc/lepus/lepus.toml
dpkg -i --no-triggers %(deb)s >&2 || exit 1
fact reinstall.kept "$(tail -1 /etc/lepus/lepus.toml)"
dpkg -r --no-triggers lepus >&2 || exit 1
fact remove.status "$(dpkg-query -W -f='${Status}' lepus)"
fact remove.binary "$(test -e /usr/sbin/lepus && echo present || echo gone)"
fact remove.conffile "$(test -e /etc/lepus/lepus.toml && echo present || echo gone)"
dpkg -P --no-triggers lepus >&2 || exit 1
fact purge.status "$(dpkg-query -W -f='${Status}' lepus 2>/dev/null || echo unknown)"
fact purge.conffile "$(test -e /etc/lepus && echo present || echo gone)"
fact purge.logs "$(test -e /var/log/lepus && echo present || echo gone)"
fact purge.links "$(find /etc/systemd -name 'lepus*' | wc -l)"
""" % {"o": overlays, "deb": self.deb}
        done = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True,
                              text=True, timeout=240)
        if done.returncode == 3:
            print("overlay mounts refused here: dpkg -i in a private namespace not run")
            self.skipTest("overlay mounts refused: " + done.stderr[-300:])
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        facts = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
        self.assertEqual(facts["install.status"], "install ok installed")
        # No systemd here: the install says the service was not started, and how to.
        self.assertEqual((facts["install.said"], facts["install.how"]), ("1", "1"))
        user = facts["install.user"].split(":")
        self.assertEqual(user[0], "lepus")
        self.assertLess(int(user[2]), 1000, "a system user")
        self.assertEqual(user[5:], ["/nonexistent", "/usr/sbin/nologin"])
        self.assertEqual(facts["install.logs"], "lepus:lepus:755")
        self.assertEqual(facts["install.enabled"], "/lib/systemd/system/lepus.service")
        self.assertEqual(facts["install.check"], "ok exit 0", "lepus -t as the user lepus")
        self.assertEqual(facts["reinstall.kept"], "# changed by the administrator")
        self.assertEqual(facts["remove.status"], "deinstall ok config-files")
        self.assertEqual(facts["remove.binary"], "gone")
        self.assertEqual(facts["remove.conffile"], "present")
        self.assertEqual(facts["purge.conffile"], "gone")
        self.assertEqual(facts["purge.logs"], "gone")
        self.assertEqual(facts["purge.links"], "0")
        self.assertNotEqual(facts["purge.status"], "install ok installed")

    def test_cmake_install_to_a_prefix_still_works(self):
        prefix = os.path.join(self.tmp, "prefix")
        done = subprocess.run(["cmake", "--install", build_dir_of(BINARY), "--prefix", prefix],
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertTrue(os.access(os.path.join(prefix, "bin", "lepus"), os.X_OK))
        for path in ("share/doc/lepus/lepus.service", "share/doc/lepus/LICENSE"):
            self.assertTrue(os.path.isfile(os.path.join(prefix, path)), path)


if __name__ == "__main__":
    unittest.main(verbosity=2)
