#!/usr/bin/env bash
# The clipboard benchmark: a copy until the other device's agent tells its session service,
# a paste of 1 KB (the link open) against a raw TLS request and answer of the same size, and a
# paste of 64 MiB against a raw TLS stream, between two handoffd processes: as root in two
# network namespaces on a bridge it makes (and removes), otherwise on loopback (nothing leaves
# this machine; multicast on lo or inside the namespaces only). Runs repeat until their medians agree within
# 10 %. Prints Markdown tables; exits 1 if a target is missed.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v swift >/dev/null 2>&1 || export PATH="/opt/swift/usr/bin:$PATH"
source Scripts/release-flags.sh
flags=("${release_flags[@]}")
for product in AgentBenchmark handoffd; do swift build "${flags[@]}" --product "$product" >&2; done
STREAM_BYTES=$((64 << 20)) exec "$(swift build "${flags[@]}" --show-bin-path)/AgentBenchmark" clipboard
