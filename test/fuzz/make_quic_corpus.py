#!/usr/bin/env python3
"""Writes the seeds of the quic_packet fuzzer (test/fuzz/quic_packet_fuzz.cc)
into test/fuzz/corpus/quic_packet/: a real client Initial, captured from
Python aioquic (scripts/install-h3-clients), framed as the driver reads its input (a byte choosing the
client address, a 2-byte big-endian length, the datagram):

  initial            the Initial alone: a new connection
  initial_twice      the same datagram again: it routes to that connection
  initial_two_paths  then from the second address (a migration attempt)
  short_initial_short  a short-header packet to its DCID, the Initial, another one

The Initial's keys come from its destination ID (RFC 9001 §5.2), so the
server decrypts it and makes a real connection. Run again to replace them."""
import os
import struct
import sys
import time

from aioquic.h3.connection import H3_ALPN
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection

HERE = os.path.dirname(os.path.abspath(__file__))


def capture_initial():
    """The first datagram of an aioquic client (its sans-I/O connection: no
    socket, no server needed)."""
    configuration = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN,
                                      server_name="localhost")
    client = QuicConnection(configuration=configuration)
    client.connect(("127.0.0.1", 443), now=time.time())
    return client.datagrams_to_send(now=time.time())[0][0]


def record(address, datagram):
    return bytes([address]) + struct.pack(">H", len(datagram)) + datagram


def main():
    initial = capture_initial()
    if initial[0] & 0xf0 != 0xc0:
        sys.exit("not a long-header Initial: %r" % initial[:8])
    dcid_length = initial[5]
    dcid = initial[6:6 + dcid_length]
    short = bytes([0x40]) + dcid + os.urandom(40)  # RFC 9000 §17.3.1, fixed bit set
    seeds = {
        "initial": record(0, initial),
        "initial_twice": record(0, initial) + record(0, initial),
        "initial_two_paths": record(0, initial) + record(1, initial),
        "short_initial_short": record(0, short) + record(0, initial) + record(0, short),
    }
    folder = os.path.join(HERE, "corpus", "quic_packet")
    os.makedirs(folder, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    print("wrote %d seeds (Initial of %d bytes) to %s" % (len(seeds), len(initial), folder))


if __name__ == "__main__":
    main()
