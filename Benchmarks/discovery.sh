#!/usr/bin/env bash
# The discovery benchmark: discovery latency against a bare multicast datagram, discovery after
# a link comes back (runs repeated until their medians agree within 10 %), and each quiet
# device's traffic, with an activity offered and with none, over IDLE_SECONDS (default 600)
# before any continuation, as long after one opened a link, and as long with a clipboard offer
# out (B copied 1 KB, A pasted it once); between two handoffd processes
# with the defaults, in two network namespaces on a bridge it makes (and removes). Needs root.
# Nothing is sent outside this machine. Prints Markdown tables; exits 1 if a target is missed.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v swift >/dev/null 2>&1 || export PATH="/opt/swift/usr/bin:$PATH"
source Scripts/release-flags.sh
flags=("${release_flags[@]}")
for product in AgentBenchmark handoffd; do swift build "${flags[@]}" --product "$product" >&2; done
exec "$(swift build "${flags[@]}" --show-bin-path)/AgentBenchmark" discovery
