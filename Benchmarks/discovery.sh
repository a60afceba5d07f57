#!/usr/bin/env bash
# The discovery benchmark: discovery latency against a bare multicast datagram, discovery after
# a link comes back, and a quiet device's traffic with and without an activity, between two
# handoffd processes in two network namespaces on a bridge it makes (and removes). Needs root.
# Nothing is sent outside this machine. IDLE_SECONDS=N changes each quiet window (default 120).
# Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
flags=(-c release --static-swift-stdlib -Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs -Xlinker --no-export-dynamic)
swift build "${flags[@]}" --product AgentBenchmark >&2
exec "$(swift build "${flags[@]}" --show-bin-path)/AgentBenchmark" discovery
