#!/usr/bin/env bash
# The agent's benchmark: continue (warm link, from the command line, and after the link went
# quiet) against the fastest bare TLS 1.3 exchange NIO makes (back to back, paced, and after
# the same quiet as the continuation), discovery, and two paired idle
# agents' memory (RSS, PSS, USS) and CPU over MEMORY_SECONDS (default 300), between real
# handoffd processes. As root in two network namespaces on a bridge it makes (and removes),
# otherwise on loopback; nothing is sent outside this machine. Runs repeat until their medians
# agree within 10 %. Prints Markdown tables; exits 1 if a target is missed.
# ITERATIONS=N (default 200) and QUIET_ITERATIONS=N (default 20: pairs of a bare exchange and a
# continuation, each after 1.4 s of quiet) change each run's size;
# PACE_MS=N (default 20) is the quiet before each paced continuation; PROFILE_SECONDS=N only
# runs warm continuations for N seconds after printing the agents' process ids, for perf.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v swift >/dev/null 2>&1 || export PATH="/opt/swift/usr/bin:$PATH"
# Built as it should be installed (docs/agent.md, Installing): the Swift runtime and Foundation
# linked in, so the process maps only what it uses, linked by lld with packed relative
# relocations and no exported symbols, so that starting touches little of the file, and the
# agent's functions grouped as it runs them (Scripts/release-flags.sh).
source Scripts/release-flags.sh
flags=("${release_flags[@]}")
for product in AgentBenchmark handoffd handoff-cli; do swift build "${flags[@]}" --product "$product" >&2; done
# `handoff` itself as docs/agent.md installs it: a static executable, which starts without a
# dynamic loader or relocations (its plain `continue` is what this benchmark times).
static=(-c release -Xswiftc -static-executable -Xswiftc -use-ld=lld --build-path .build-static)
swift build "${static[@]}" --product handoff >&2
export HANDOFF_CLI_FRONT="$(swift build "${static[@]}" --show-bin-path)/handoff"
benchmark="$(swift build "${flags[@]}" --show-bin-path)/AgentBenchmark"
"$benchmark" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' INT TERM
status=0
wait "$pid" || status=$?
# The benchmark removes what it made as it ends. One that died instead (a trap, SIGKILL) leaves
# its agents, its network namespaces and its folder: they go here.
if [ "$status" -gt 128 ]; then
    pkill -f "/tmp/hb-$pid/" 2>/dev/null || true
    sleep 0.5
    for namespace in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^hb$((pid % 100000))(a|b|br)$|^hb${pid}probe$" || true); do
        ip netns del "$namespace" 2>/dev/null || true
    done
    rm -rf "/tmp/hb-$pid"
    echo "agent.sh: the benchmark ended with signal $((status - 128)); what it left was removed" >&2
fi
exit "$status"
