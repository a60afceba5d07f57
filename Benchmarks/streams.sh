#!/usr/bin/env bash
# The continuation streams benchmark: 1 GiB from one app to another through a stream pair,
# through two real handoffd processes and their TLS link, against a raw TLS 1.3 stream between
# two processes, in the same run, on loopback (nothing leaves this machine; multicast on lo
# only). STREAM_BYTES=N changes the size. Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
flags=(-c release --static-swift-stdlib -Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs -Xlinker --no-export-dynamic)
swift build "${flags[@]}" --product AgentBenchmark >&2
swift build "${flags[@]}" --product handoffd >&2
exec "$(swift build "${flags[@]}" --show-bin-path)/AgentBenchmark" streams
