#!/bin/sh
# TLS 1.3 early data (0-RTT) offered to a listener, for the S4 test, with OpenSSL's client:
# connects once with a certificate of its own and keeps the session (and its ticket), then
# connects again resuming it and sending a frame as early data. Prints the second
# connection's verdicts: `FIRST ok|failed` (the first handshake), `RESUMED yes|no` and
# `EARLY accepted|rejected|not sent`.
#
#   early_data.sh PORT          against a listener on 127.0.0.1:PORT
#   early_data.sh control       against OpenSSL's own server with early data on (on a free
#                               port), to show the probe sees early data accepted where it is
set -eu
work=$(mktemp -d)
trap 'rm -rf "$work"; [ -n "${server:-}" ] && kill "$server" 2>/dev/null || true' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$work/key.pem" -out "$work/cert.pem" \
  -subj /CN=Handoff -days 1 >/dev/null 2>&1
# A hello frame: 4-byte length, kind 0x01, version 2 and 16 bytes of device id.
printf '\000\000\000\021\001\002AAAAAAAAAAAAAAAA' > "$work/early.bin"
if [ "$1" = control ]; then
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  # Its standard input must stay open, or it closes each connection at once.
  sleep 30 | openssl s_server -accept "127.0.0.1:$port" -cert "$work/cert.pem" -key "$work/key.pem" -early_data -tls1_3 >"$work/server.log" 2>&1 &
  server=$!
  sleep 1
else
  port=$1
fi
sleep 1 | openssl s_client -connect "127.0.0.1:$port" -tls1_3 -sess_out "$work/session.pem" -cert "$work/cert.pem" -key "$work/key.pem" >"$work/first.log" 2>&1 || true
# The first handshake must have worked, or nothing below tests anything.
if grep -q '^New, TLSv1.3' "$work/first.log"; then echo "FIRST ok"; else echo "FIRST failed"; fi
if [ ! -s "$work/session.pem" ]; then
  echo "RESUMED no"
  echo "EARLY not sent (no session was kept)"
  exit 0
fi
sleep 1 | openssl s_client -connect "127.0.0.1:$port" -tls1_3 -sess_in "$work/session.pem" -early_data "$work/early.bin" \
  -cert "$work/cert.pem" -key "$work/key.pem" >"$work/second.log" 2>&1 || true
if grep -q '^Reused' "$work/second.log"; then echo "RESUMED yes"; else echo "RESUMED no"; fi
if grep -q 'Early data was accepted' "$work/second.log"; then echo "EARLY accepted"
elif grep -q 'Early data was rejected' "$work/second.log"; then echo "EARLY rejected"
else echo "EARLY not sent"; fi
