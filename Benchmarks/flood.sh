#!/usr/bin/env bash
# The flood load (SECURITY.md S3 and S10): 10^7 forged beacons offered to the beacon opener;
# then two real handoffd processes paired in one account (in network namespaces it makes when
# run as root, else on loopback; nothing leaves this machine) while a flooder sends A 10^5
# beacons a second and opens 10^3 connections a second for FLOOD_SECONDS (default 40), and B
# continues A's activity throughout; then 6,000 spoofed source addresses send A 6,000 beacons
# a second (SPOOF_SECONDS, default 120), and 40 addresses hold 16 silent connections each to
# A's link port while B restarts (MANY_SECONDS, default 30). Prints Markdown tables, B's
# continue p50/p99 in each flood beside the quiet one; exits non-zero if a continuation
# fails, A stops listing B, A's memory passes its bound, or A logs a flood more than once.
# FLOOD_SECONDS, FLOOD_BEACONS, FLOOD_CONNECTIONS, FORGED_BEACONS, SPOOF_SECONDS and
# MANY_SECONDS change the load.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v swift >/dev/null 2>&1 || export PATH="/opt/swift/usr/bin:$PATH"
source Scripts/release-flags.sh
flags=("${release_flags[@]}")
swift build "${flags[@]}" --product AgentBenchmark >&2
swift build "${flags[@]}" --product handoffd >&2
exec "$(swift build "${flags[@]}" --show-bin-path)/AgentBenchmark" flood
