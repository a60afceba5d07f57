#!/usr/bin/env bash
# The scale benchmark: DEVICES handoffd processes (default 32), each in a network namespace of
# its own on one bridge it makes (and removes), in ACCOUNTS accounts (default 1; ACCOUNTS=8
# makes 8 of 4 sharing the link): how long joining and meshing take, discovery to every member,
# each device's traffic, memory and CPU over IDLE_SECONDS (default 240, from SETTLE_SECONDS, default 60, after the last discovery change), and the links open.
# Needs root. Nothing is sent outside this machine. Prints Markdown tables; exits 1 if a target
# is missed.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v swift >/dev/null 2>&1 || export PATH="/opt/swift/usr/bin:$PATH"
source Scripts/release-flags.sh
flags=("${release_flags[@]}")
for product in AgentBenchmark handoffd; do swift build "${flags[@]}" --product "$product" >&2; done
exec "$(swift build "${flags[@]}" --show-bin-path)/AgentBenchmark" scale
