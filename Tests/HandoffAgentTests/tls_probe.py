#!/usr/bin/env python3
"""A stranger's TLS handshake with a port, for the S1 test: prints the certificate the server
presented, `CERT <hex of its DER>`, or `NONE <reason>`.

    tls_probe.py HOST PORT
"""

import socket
import ssl
import sys


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
    print(f"CERT {certificate.hex()}" if certificate else "NONE no certificate", flush=True)


if __name__ == "__main__":
    main()
