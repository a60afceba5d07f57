#!/usr/bin/env bash
# userInfo encoding benchmark: Handoff's encoding against PropertyListSerialization (binary)
# and JSONSerialization on the same data, in the same run. Prints a Markdown table.
# ITERATIONS=N changes the iterations per round (default 2000).
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product UserInfoBenchmark >&2
exec "$(swift build -c release --show-bin-path)/UserInfoBenchmark"
