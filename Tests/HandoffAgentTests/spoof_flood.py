#!/usr/bin/env python3
"""Floods an agent's beacon port on loopback with beacon-sized random datagrams from many
spoofed source addresses (127.1.0.0/16; every 127/8 address is this machine's own), as the
S10 starvation test needs. One socket, each datagram's source set with IP_PKTINFO, sent on
`lo` only (the interface index forces it) to the group the agent listens on.

    spoof_flood.py GROUP PORT SOURCES RATE SECONDS SIZE

Paces itself every millisecond; prints `SENT N` at the end.
"""

import os
import socket
import struct
import sys
import time

IP_PKTINFO = 8          # Linux


def main() -> None:
    group, port, sources, rate, seconds, size = sys.argv[1:7]
    port, sources, rate, seconds, size = int(port), int(sources), int(rate), float(seconds), int(size)
    lo = socket.if_nametoindex("lo")
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # Multicast leaves through lo and nowhere else.
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
    addresses = [socket.inet_aton(f"127.1.{i // 250}.{i % 250 + 1}") for i in range(sources)]
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
            info = struct.pack("=I4s4s", lo, source, source)
            try:
                sock.sendmsg([payloads[sent % 64]], [(socket.IPPROTO_IP, IP_PKTINFO, info)], 0, (group, port))
            except OSError:
                pass
            sent += 1
        time.sleep(0.001)
    print(f"SENT {sent}", flush=True)


if __name__ == "__main__":
    main()
