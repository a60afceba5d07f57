#!/usr/bin/env bash
# Runs benchmarks of two commits in one sitting on this machine, so that a change can be shown
# to be no slower than the commit before it: each commit is cloned into a folder of its own
# (under /tmp, removed at the end) and built there by its own scripts; then each benchmark runs
# for both, in alternating order (base first, then head first for the next), so that a machine
# that warms or cools over the sitting does not favour one side. Each benchmark runs ROUNDS
# times per side (default 2, in the order base, head, head, base): one run per side once showed
# `handoff continue` 25 % slower at the head when the same binaries, run again, differed by
# under 3 % (docs/agent.md, Performance); a difference that does not hold in every round is not one.
#
#   Benchmarks/compare.sh [BASE [HEAD]]     (default: HEAD~1 and HEAD)
#   BENCHMARKS="agent streams discovery"    (default; the scripts' names without .sh)
#   ROUNDS=N                                (default 2)
#
# The scripts' own knobs pass through (MEMORY_SECONDS, IDLE_SECONDS, STREAM_BYTES, ...). Each
# script's tables are printed under the commit they are for, with its exit status. This
# script exits 2 if any run failed to run at all (a status other than 0 or 1), else 1 if a run
# of the head missed a target (status 1; the base's misses are reported beside the figures,
# since both sides may miss the same one), else 0. It ends with one line per run's status.
# A script whose build fails exits 1 as well, and `agent.sh` misses a target when it is not
# run as root (no namespaces): read the statuses' lines, not only this script's.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
base="${1:-HEAD~1}"
head="${2:-HEAD}"
benchmarks=(${BENCHMARKS:-agent streams discovery})
rounds="${ROUNDS:-2}"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "compare.sh: ROUNDS must be a whole number from 1, not '$rounds'" >&2; exit 2; }
work="$(mktemp -d /tmp/handoff-compare.XXXXXX)"
trap 'rm -rf "$work"' EXIT

declare -A commit
for side in base head; do
    rev="$base"; [ "$side" = head ] && rev="$head"
    commit[$side]="$(git -C "$root" rev-parse --short "$rev")" || { echo "compare.sh: no commit '$rev'" >&2; exit 2; }
    git clone -q --no-checkout "$root" "$work/$side"
    git -C "$work/$side" checkout -q "${commit[$side]}"
    # The same package mirrors and settings as the checkout this runs from.
    [ -d "$root/.swiftpm" ] && cp -r "$root/.swiftpm" "$work/$side/"
done

failed=0
missed=0
summary=()
order=(base head)
for name in "${benchmarks[@]}"; do
  for round in $(seq "$rounds"); do
    for side in "${order[@]}"; do
        script="$work/$side/Benchmarks/$name.sh"
        echo
        echo "## $name.sh at $side (${commit[$side]}), round $round of $rounds"
        echo
        if [ ! -x "$script" ]; then
            echo "(no $name.sh at ${commit[$side]})"
            continue
        fi
        "$script"
        status=$?
        echo
        echo "exit status: $status"
        [ "$status" -gt 1 ] && failed=1
        [ "$status" -eq 1 ] && [ "$side" = head ] && missed=1
        summary+=("$name.sh at $side (${commit[$side]}), round $round: exit status $status")
    done
    order=("${order[1]}" "${order[0]}")
  done
done
echo
printf '%s\n' "${summary[@]}"
[ "$failed" -eq 1 ] && exit 2
exit "$missed"
