#!/usr/bin/env python3
"""A link's membership proof made by another stack than the agent's, for the tests that attack
links (docs/wire-protocol.md, Membership proof), and a stranger's attack on a link port.

As a module: `proof_frame(role, long_term_cert_der, long_term_key, connecting_shown,
answering_shown, account_keys)` and `read_frame(tls)`.

As a program:

    link_proof.py stranger HOST PORT MODE

connects as a stranger with a certificate of its own, TLS 1.3, and sends what MODE says:
`garbage` (a proof frame of random boxes), `hello` (a hello frame in place of the proof),
`replay` (a proof frame a member made for another link, read as hex from standard input).
Prints `RECEIVED <n> bytes, closed=<bool>`: how many application bytes the listener sent before
it closed the link, or before 5 s passed.
"""

import datetime
import hashlib
import os
import socket
import ssl
import struct
import sys
import tempfile

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.x509.oid import NameOID

CONTEXT = b"handoff link proof 1"
KEY_INFO = b"handoff link proof key"
CONNECTING, ANSWERING = 1, 2
PROOF_KIND = 0x02
CERTIFICATE_ROOM = 1024
CONNECTING_BOXES = 8


def box_size(certificate_length: int) -> int:
    room = max(1, -(-certificate_length // CERTIFICATE_ROOM)) * CERTIFICATE_ROOM
    return 12 + 2 + room + 64 + 16


def varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def frame(kind: int, payload: bytes) -> bytes:
    return struct.pack(">IB", len(payload), kind) + payload


def proof_frame(role, certificate_der, long_term_key, connecting_shown, answering_shown, account_keys):
    transcript = CONTEXT + bytes([role]) + hashlib.sha256(connecting_shown).digest() + hashlib.sha256(answering_shown).digest()
    r, s = decode_dss_signature(long_term_key.sign(transcript, ec.ECDSA(hashes.SHA256())))
    size = box_size(len(certificate_der))
    plain = struct.pack(">H", len(certificate_der)) + certificate_der + r.to_bytes(32, "big") + s.to_bytes(32, "big")
    plain += bytes(size - 28 - len(plain))
    boxes = []
    for account_key in account_keys:
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=KEY_INFO).derive(account_key)
        nonce = os.urandom(12)
        boxes.append(nonce + ChaCha20Poly1305(key).encrypt(nonce, plain, bytes([role])))
    # The connecting side always sends as many boxes, random ones filling up.
    while role == CONNECTING and len(boxes) < CONNECTING_BOXES:
        boxes.append(os.urandom(size))
    payload = varint(len(boxes)) + b"".join(varint(len(box)) + box for box in boxes)
    return frame(PROOF_KIND, payload)


def read_frame(tls):
    """The next frame (kind, payload), or None when the link closes first."""
    def exactly(count):
        data = b""
        while len(data) < count:
            chunk = tls.recv(count - len(data))
            if not chunk:
                return None
            data += chunk
        return data
    header = exactly(5)
    if header is None:
        return None
    length, kind = struct.unpack(">IB", header)
    payload = exactly(length)
    return None if payload is None else (kind, payload)


def own_certificate():
    """A self-signed certificate and key in PEM files, as any TLS client could make."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Handoff")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
                   .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    folder = tempfile.mkdtemp()
    cert_path, key_path = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
    with open(cert_path, "wb") as out:
        out.write(certificate.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as out:
        out.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return cert_path, key_path


def stranger(host, port, mode):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.load_cert_chain(*own_certificate())
    if mode == "garbage":
        boxes = [os.urandom(box_size(500)) for _ in range(CONNECTING_BOXES)]
        sent = frame(PROOF_KIND, varint(len(boxes)) + b"".join(varint(len(b)) + b for b in boxes))
    elif mode == "hello":
        sent = frame(0x01, bytes([2]) + os.urandom(16))
    elif mode == "replay":
        sent = bytes.fromhex(sys.stdin.readline().strip())
    else:
        raise SystemExit(f"unknown mode {mode}")
    received, closed = 0, False
    with socket.create_connection((host, port), timeout=5) as raw:
        with context.wrap_socket(raw) as tls:
            tls.sendall(sent)
            try:
                while True:
                    chunk = tls.recv(65536)
                    if not chunk:
                        closed = True
                        break
                    received += len(chunk)
            except socket.timeout:
                pass
            except (ssl.SSLError, OSError):
                closed = True
    print(f"RECEIVED {received} bytes, closed={closed}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "stranger":
        stranger(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        raise SystemExit(__doc__)
