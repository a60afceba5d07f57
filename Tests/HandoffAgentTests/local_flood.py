"""A second local user's flood of beacon-sized datagrams, sent from the machine's own address
(no spoofing: an ordinary socket of an unprivileged user), to the beacon group on INTERFACE,
for the shared-machine attack tests (NamespaceTests). Runs inside a network namespace the
test made; never aim it elsewhere.

    local_flood.py GROUP PORT INTERFACE RATE SECONDS

Prints `ready` after its first second of sending, and `SENT N` at the end: after SECONDS,
or when standard input ends, whichever comes first.
"""

import os
import select
import socket
import struct
import sys
import time


def main() -> None:
    group, port, interface, rate, seconds = sys.argv[1:6]
    port, rate, seconds = int(port), int(rate), float(seconds)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    index = socket.if_nametoindex(interface)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, struct.pack("=4s4si", b"\0" * 4, b"\0" * 4, index))
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
    payloads = [os.urandom(512) for _ in range(64)]
    started = time.monotonic()
    sent = 0
    ready = False
    while True:
        elapsed = time.monotonic() - started
        if elapsed >= seconds:
            break
        readable, _, _ = select.select([sys.stdin], [], [], 0.001)
        if readable and not sys.stdin.readline():
            break
        if not ready and elapsed >= 1:
            print("ready", flush=True)
            ready = True
        due = int(elapsed * rate)
        while sent < due:
            try:
                sock.sendto(payloads[sent % 64], (group, port))
            except OSError:
                pass
            sent += 1
    print(f"SENT {sent}", flush=True)


if __name__ == "__main__":
    main()
