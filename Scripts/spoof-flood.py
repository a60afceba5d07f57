#!/usr/bin/env python3
"""Floods an agent's beacon port with beacon-sized random datagrams from many spoofed source
addresses: the S10 starvation attack, for the test suite (FloodTests) and Benchmarks/flood.sh.
One socket; each datagram's source is set with IP_PKTINFO, and it leaves through INTERFACE
only (the interface index forces it). Sources are PREFIX.X.Y (127.1 by default: every 127/8
address is this machine's own; another prefix needs root, for IP_TRANSPARENT, and is meant
for a network namespace the caller made). Never aim it at an address outside this machine or
its own namespaces.

    spoof-flood.py TARGET PORT SOURCES RATE SECONDS SIZE [PREFIX] [INTERFACE]

TARGET is a multicast group (sent on INTERFACE) or a unicast address. Paces itself every
millisecond; prints `SENT N` at the end.
"""

import os
import socket
import struct
import sys
import time

IP_PKTINFO = 8          # Linux
IP_TRANSPARENT = 19     # Linux: send from addresses this host does not have (root)


def main() -> None:
    target, port, sources, rate, seconds, size = sys.argv[1:7]
    prefix = sys.argv[7] if len(sys.argv) > 7 else "127.1"
    interface = sys.argv[8] if len(sys.argv) > 8 else "lo"
    port, sources, rate, seconds, size = int(port), int(sources), int(rate), float(seconds), int(size)
    index = socket.if_nametoindex(interface)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if interface == "lo":
        # Multicast leaves through lo and nowhere else.
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
    if not prefix.startswith("127."):
        sock.setsockopt(socket.SOL_IP, IP_TRANSPARENT, 1)
    addresses = [socket.inet_aton(f"{prefix}.{i // 250}.{i % 250 + 1}") for i in range(sources)]
    payloads = [os.urandom(size) for _ in range(64)]
    started = time.monotonic()
    sent = 0
    while True:
        elapsed = time.monotonic() - started
        if elapsed >= seconds:
            break
        due = int(elapsed * rate)
        while sent < due:
            source = addresses[sent % sources]
            info = struct.pack("=I4s4s", index, source, source)
            try:
                sock.sendmsg([payloads[sent % 64]], [(socket.IPPROTO_IP, IP_PKTINFO, info)], 0, (target, port))
            except OSError:
                pass
            sent += 1
        time.sleep(0.001)
    print(f"SENT {sent}", flush=True)


if __name__ == "__main__":
    main()
