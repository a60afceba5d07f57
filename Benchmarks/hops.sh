#!/usr/bin/env bash
# Where a continuation after quiet spends its time, hop by hop (docs/agent.md, "After quiet,
# hop by hop"). The agent's benchmark (agent.sh) with HOPS=N: after a short warm run, N
# continuations (default 40), each 1.4 s after the one before, on a link closed after 1 s
# unused, while every process (the caller, both agents, the apps) stamps CLOCK_MONOTONIC where
# each continuation is (HopTrace, HANDOFF_HOP_TRACE); then N bare exchanges after the same
# quiet, stamped the same way. Prints each one's hops (medians, 10th to 90th percentiles) as
# Markdown tables; exits 1 if fewer than half the continuations, or half the bare exchanges,
# had every stamp. Real handoffd processes in two network namespaces as root, else on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
export HOPS="${HOPS:-40}" ITERATIONS="${ITERATIONS:-50}" QUIET_ITERATIONS="${QUIET_ITERATIONS:-5}" MEMORY_SECONDS="${MEMORY_SECONDS:-2}"
exec bash Benchmarks/agent.sh
