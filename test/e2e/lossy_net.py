"""A network namespace whose loopback loses packets at random (issue 39: HTTP/3
must deliver every byte under 1% and 5% loss), for a server and a client the
test starts inside it.

    with lossy_net.LossyNamespace(5) as net:      # unittest.SkipTest if impossible
        server = harness.Lepus(..., preexec=net.enter)
        subprocess.run(net.command(["python3", "h3client.py", url]))
        assert net.dropped() > 0

The loss is `tc qdisc add dev lo root netem loss P%` where the kernel has
sch_netem; where it has not (a kernel built without it and without modules,
as this project's sandboxes are), an nftables rule on the input hook,
`numgen random mod 10000 < P*100 drop`, which on loopback sees each packet
once, as netem on lo does, and like netem leaves the sender's sendmsg() alone.
`.method` says which one was used; `dropped()` counts the packets dropped so
far, so a test can check the loss was real.
"""
import ctypes
import itertools
import os
import re
import shutil
import subprocess
import unittest

IP = shutil.which("ip") or "/usr/sbin/ip"
TC = shutil.which("tc") or "/usr/sbin/tc"
NFT = shutil.which("nft") or "/usr/sbin/nft"
CLONE_NEWNET = 0x40000000
_names = itertools.count()


def _run(argv):
    return subprocess.run(argv, capture_output=True, text=True, timeout=30)


class LossyNamespace:
    """A fresh network namespace (loopback up) dropping `percent` % of packets."""

    def __init__(self, percent):
        if os.geteuid() != 0:
            raise unittest.SkipTest("packet loss needs root (a network namespace and tc/nft)")
        if not os.path.exists(IP):
            raise unittest.SkipTest("packet loss needs iproute2's ip (apt-get install iproute2)")
        self.percent = percent
        self.name = "lepus-loss-%d-%d" % (os.getpid(), next(_names))
        made = _run([IP, "netns", "add", self.name])
        if made.returncode != 0:
            raise unittest.SkipTest("cannot make a network namespace: " + made.stderr.strip())
        try:
            self._check(_run(self.command([IP, "link", "set", "lo", "up"])), "ip link set lo up")
            self.method = self._add_loss()
        except BaseException:
            self.close()
            raise

    def _add_loss(self):
        netem = _run(self.command([TC, "qdisc", "add", "dev", "lo", "root", "netem", "loss",
                                   "%g%%" % self.percent]))
        if netem.returncode == 0:
            return "netem"
        if not os.path.exists(NFT):
            raise unittest.SkipTest("no packet loss possible: tc netem failed (%s) and nft is "
                                    "missing (apt-get install nftables)" % netem.stderr.strip())
        # On the input hook, not output: a packet dropped on output fails the
        # sender's sendmsg() with EPERM, which QUIC stacks take for a dead path
        # (quic-go, ngtcp2 and aioquic all stalled until their idle timeout).
        rules = ("table inet lepus_loss {\n chain input {\n"
                 "  type filter hook input priority 0; policy accept;\n"
                 "  numgen random mod 10000 < %d counter drop\n }\n}\n" % round(self.percent * 100))
        nft = subprocess.run(self.command([NFT, "-f", "-"]), input=rules, capture_output=True,
                             text=True, timeout=30)
        if nft.returncode != 0:
            raise unittest.SkipTest("no packet loss possible: tc netem failed (%s), nft too (%s)" %
                                    (netem.stderr.strip(), nft.stderr.strip()))
        return "nftables"

    @staticmethod
    def _check(done, what):
        if done.returncode != 0:
            raise unittest.SkipTest("%s in a network namespace failed: %s" % (what,
                                                                               done.stderr.strip()))

    def command(self, argv):
        """`argv` run inside the namespace."""
        return [IP, "netns", "exec", self.name] + list(argv)

    def enter(self):
        """Moves the calling process into the namespace: a preexec_fn for
        subprocess.Popen (harness.Lepus(preexec=...)), run after fork."""
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open("/var/run/netns/" + self.name, os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns " + self.name)
        finally:
            os.close(fd)

    def dropped(self):
        """Packets dropped so far by the loss rule."""
        if self.method == "netem":
            shown = _run(self.command([TC, "-s", "qdisc", "show", "dev", "lo"])).stdout
            match = re.search(r"dropped (\d+)", shown)
        else:
            shown = _run(self.command([NFT, "list", "table", "inet", "lepus_loss"])).stdout
            match = re.search(r"counter packets (\d+)", shown)
        return int(match.group(1)) if match else 0

    def close(self):
        _run([IP, "netns", "del", self.name])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
