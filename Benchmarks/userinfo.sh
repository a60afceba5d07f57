#!/usr/bin/env bash
# userInfo encoding benchmark: Handoff's encoding against PropertyListSerialization (binary)
# and JSONSerialization on the same data, in the same run. Prints Markdown tables; exits 1 if
# a target is missed. ITERATIONS=N changes the iterations per round (default 2000).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v swift >/dev/null 2>&1 || export PATH="/opt/swift/usr/bin:$PATH"
swift build -c release --product UserInfoBenchmark >&2
exec "$(swift build -c release --show-bin-path)/UserInfoBenchmark"
