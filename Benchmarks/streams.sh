#!/usr/bin/env bash
# The continuation streams benchmark: STREAM_BYTES (default 1 GiB) from one app to another
# through a stream pair, through two real handoffd processes and their TLS link, against a raw
# TLS 1.3 stream between two processes (NIO bare, NIO checked as the streams are, and
# OpenSSL through Python as the independent one: Benchmarks/tls_stream.py), one after
# the other in each run, on loopback (nothing leaves this machine; multicast on lo only). Runs
# repeat until their medians agree within 10 %. Prints Markdown tables; exits 1 if a target is
# missed (the streams under 50 % of the faster baseline in any run).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v swift >/dev/null 2>&1 || export PATH="/opt/swift/usr/bin:$PATH"
source Scripts/release-flags.sh
flags=("${release_flags[@]}")
for product in AgentBenchmark handoffd; do swift build "${flags[@]}" --product "$product" >&2; done
exec "$(swift build "${flags[@]}" --show-bin-path)/AgentBenchmark" streams
