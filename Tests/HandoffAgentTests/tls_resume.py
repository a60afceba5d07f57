#!/usr/bin/env python3
"""A device's TLS client that keeps its session ticket, for the S5/S7 resumption test.

    tls_resume.py HOST PORT CERT_PEM KEY_PEM ACCOUNT_KEY_HEX FRAME_HEX

Connects with the certificate, proves membership with its key and the account key
(link_proof.py), sends the frame, reads the answer and keeps the session the
listener gave. Then waits for a line on standard input (the test removes the device from the
account meanwhile) and connects again offering that session, sending the same frame. Prints
`FIRST answered=BOOL reused=BOOL` and `SECOND answered=BOOL reused=BOOL`.
"""

import socket
import ssl
import struct
import sys

from cryptography import x509
from cryptography.hazmat.primitives import serialization

import link_proof


def exchange(context: ssl.SSLContext, host: str, port: int, frame: bytes, member, session=None):
    # Generous: the suite runs this beside everything else, on two cores.
    raw = socket.create_connection((host, port), timeout=30)
    try:
        tls = context.wrap_socket(raw, session=session)
    except (ssl.SSLError, OSError):
        raw.close()
        return None, False, False
    reused = tls.session_reused
    answered = False
    try:
        certificate, key, account_key = member
        # The membership proof first, as the agent's links do; the listener answers with its own.
        answering = tls.getpeercert(binary_form=True)
        tls.sendall(link_proof.proof_frame(link_proof.CONNECTING, certificate, key, certificate, answering, [account_key]))
        if link_proof.read_frame(tls) is None:
            raise OSError("no proof came back")
        tls.sendall(frame)
        header = b""
        while len(header) < 5:
            chunk = tls.recv(5 - len(header))
            if not chunk:
                break
            header += chunk
        if len(header) == 5:
            length = struct.unpack(">I", header[:4])[0]
            body = b""
            while len(body) < length:
                chunk = tls.recv(length - len(body))
                if not chunk:
                    break
                body += chunk
            answered = len(body) == length
    except (ssl.SSLError, OSError) as error:
        print(f"ERROR {type(error).__name__}: {error}", flush=True)
    session = tls.session
    tls.close()
    return session, answered, reused


def main() -> None:
    host, port, cert, key, account_key_hex, frame_hex = sys.argv[1:7]
    frame = bytes.fromhex(frame_hex)
    with open(cert, "rb") as pem:
        certificate = x509.load_pem_x509_certificate(pem.read()).public_bytes(serialization.Encoding.DER)
    with open(key, "rb") as pem:
        private_key = serialization.load_pem_private_key(pem.read(), password=None)
    member = (certificate, private_key, bytes.fromhex(account_key_hex))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.load_cert_chain(cert, key)
    session, answered, reused = exchange(context, host, int(port), frame, member)
    print(f"FIRST answered={answered} reused={reused} ticket={session is not None and session.has_ticket}", flush=True)
    sys.stdin.readline()
    _, answered, reused = exchange(context, host, int(port), frame, member, session=session)
    print(f"SECOND answered={answered} reused={reused}", flush=True)


if __name__ == "__main__":
    main()
