#!/usr/bin/env python3
"""A stranger's TLS handshake with a port, for the S1 test: prints the certificate the server
presented, `CERT <hex of its DER>`, or `NONE <reason>`; then the public keys an attacker
recovers from the certificate's ECDSA signature, `KEY <hex of the uncompressed point>` each
(the key that signed it is among them, whoever's key that is).

    tls_probe.py HOST PORT
"""

import hashlib
import socket
import ssl
import sys

# P-256 (SEC 2, secp256r1).
P = 0xFFFFFFFF00000001000000000000000000000000FFFFFFFFFFFFFFFFFFFFFFFF
A = P - 3
B = 0x5AC635D8AA3A93E7B3EBBD55769886BC651D06B0CC53B0F63BCE3C3E27D2604B
N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
G = (0x6B17D1F2E12C4247F8BCE6E563A440F277037D812DEB33A0F4A13945D898C296,
     0x4FE342E2FE1A7F9B8EE7EB4A7C0F9E162BCE33576B315ECECBB6406837BF51F5)


def add(p, q):
    if p is None:
        return q
    if q is None:
        return p
    if p[0] == q[0] and (p[1] + q[1]) % P == 0:
        return None
    if p == q:
        slope = (3 * p[0] * p[0] + A) * pow(2 * p[1], -1, P) % P
    else:
        slope = (q[1] - p[1]) * pow(q[0] - p[0], -1, P) % P
    x = (slope * slope - p[0] - q[0]) % P
    return (x, (slope * (p[0] - x) - p[1]) % P)


def multiply(k, point):
    result = None
    while k:
        if k & 1:
            result = add(result, point)
        point = add(point, point)
        k >>= 1
    return result


def recovered_keys(certificate_der):
    """The public keys Q for which the certificate's signature verifies: Q = r⁻¹(sR − eG)."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
    except ImportError:
        return []
    certificate = x509.load_der_x509_certificate(certificate_der)
    r, s = decode_dss_signature(certificate.signature)
    e = int.from_bytes(hashlib.sha256(certificate.tbs_certificate_bytes).digest(), "big")
    keys = []
    for x in (r, r + N):
        if x >= P:
            continue
        y = pow((x * x * x + A * x + B) % P, (P + 1) // 4, P)
        if y * y % P != (x * x * x + A * x + B) % P:
            continue
        for candidate_y in (y, P - y):
            point = (x, candidate_y)
            q = multiply(pow(r, -1, N), add(multiply(s, point), multiply(N - e % N, G)))
            if q is not None:
                keys.append(b"\x04" + q[0].to_bytes(32, "big") + q[1].to_bytes(32, "big"))
    return keys


def main() -> None:
    host, port = sys.argv[1], int(sys.argv[2])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=5) as raw:
            with context.wrap_socket(raw) as tls:
                certificate = tls.getpeercert(binary_form=True)
    except (ssl.SSLError, OSError) as error:
        print(f"NONE {error}", flush=True)
        return
    if not certificate:
        print("NONE no certificate", flush=True)
        return
    print(f"CERT {certificate.hex()}", flush=True)
    for key in recovered_keys(certificate):
        print(f"KEY {key.hex()}", flush=True)


if __name__ == "__main__":
    main()
