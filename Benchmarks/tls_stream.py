#!/usr/bin/env python3
"""A raw TLS 1.3 stream with OpenSSL (Python's ssl module), the streams benchmark's
independent baseline: one process per side on loopback, both certificates presented and each
side trusting only the other's, 1 MiB sendall / recv_into, nothing else in the path.

Usage: tls_stream.py FOLDER BYTES  (FOLDER holds server.pem, server.key.pem, client.pem,
client.key.pem). Prints the MiB/s from the first byte sent to the receiver's 32-byte answer."""
import os
import socket
import ssl
import sys
import time

folder, total = sys.argv[1], int(sys.argv[2])


def context(side, peer, server):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server else ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_cert_chain(f"{folder}/{side}.pem", f"{folder}/{side}.key.pem")
    ctx.load_verify_locations(f"{folder}/{peer}.pem")
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.check_hostname = False
    return ctx


listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen()
port = listener.getsockname()[1]
if os.fork() == 0:
    connection, _ = listener.accept()
    stream = context("server", "client", True).wrap_socket(connection, server_side=True)
    buffer = bytearray(1 << 20)
    received = 0
    while received < total:
        count = stream.recv_into(buffer)
        if count == 0:
            break
        received += count
    stream.sendall(b"\0" * 32)
    stream.close()
    os._exit(0 if received == total else 1)
stream = context("client", "server", False).wrap_socket(socket.create_connection(("127.0.0.1", port)))
block = os.urandom(1 << 20)
start = time.monotonic()
left = total
while left > 0:
    count = min(left, len(block))
    stream.sendall(block if count == len(block) else block[:count])
    left -= count
answer = b""
while len(answer) < 32:
    more = stream.recv(32 - len(answer))
    if not more:
        sys.exit("the receiver closed before answering")
    answer += more
seconds = time.monotonic() - start
os.wait()
print(f"{total / (1 << 20) / seconds:.1f}")
