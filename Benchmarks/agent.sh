#!/usr/bin/env bash
# The agent's benchmark: continue latency against a bare TLS 1.3 exchange, discovery latency,
# and the idle agent's memory and CPU, between two real handoffd processes. As root it puts
# them in two network namespaces on a bridge it makes (and removes); otherwise on loopback.
# Nothing is sent outside this machine. ITERATIONS=N changes the number of continuations
# (default 200). Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
# handoffd is built as it should be installed (docs/agent.md, Installing): the Swift runtime
# and Foundation linked in, so the process maps only what it uses, linked by lld with packed
# relative relocations and no exported symbols, so that starting touches little of the file.
flags=(-c release --static-swift-stdlib -Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs -Xlinker --no-export-dynamic)
swift build "${flags[@]}" --product AgentBenchmark >&2
exec "$(swift build "${flags[@]}" --show-bin-path)/AgentBenchmark"
