#!/usr/bin/env bash
# Instructions per warm continuation in each agent, counted by valgrind's callgrind: a figure
# that this machine's noise does not move (timings of the same binaries differ by 20-40 %
# between runs here; instruction counts by under 1 %), so that a change to the warm path can
# be judged in one run. Beside it, the baseline counted the same way in the same run: the
# same 3 KB request and answer on a kept TLS connection (NIO, TLS 1.3, both certificates),
# in its client and its server. Prints a table and each agent's most costly functions; exits
# 1 when an agent's count is over INSTRUCTION_BUDGET (default 450000 a continuation).
# PROFILE_SECONDS=N (default 30): how long continuations run under valgrind (about 80 a
# second). As root in two network namespaces on a bridge it makes, otherwise on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v swift >/dev/null 2>&1 || export PATH="/opt/swift/usr/bin:$PATH"
command -v valgrind >/dev/null 2>&1 || { echo "instructions.sh needs valgrind (apt-get install valgrind)" >&2; exit 2; }
budget="${INSTRUCTION_BUDGET:-450000}"
seconds="${PROFILE_SECONDS:-30}"
short=200
long=2200
# The release build agent.sh measures.
source Scripts/release-flags.sh
flags=("${release_flags[@]}")
for product in AgentBenchmark handoffd; do swift build "${flags[@]}" --product "$product" >&2; done
bin="$(swift build "${flags[@]}" --show-bin-path)"
work="$(mktemp -d /tmp/handoff-instructions.XXXXXX)"
[ -n "${KEEP_WORK:-}" ] || trap 'rm -rf "$work"' EXIT
# valgrind 3.19 cannot read the DWARF 5 debug information clang writes and gives up: copies
# without it (the symbol table, which names the functions, stays). AgentBenchmark finds
# handoffd, and runs the receiving app, from its own folder: both are these copies.
for program in AgentBenchmark handoffd; do objcopy --strip-debug "$bin/$program" "$work/$program"; done
cat > "$work/callgrind" <<EOF
#!/bin/sh
exec valgrind --tool=callgrind --compress-strings=no --compress-pos=no --callgrind-out-file=$work/cg.%p "\$@"
EOF
chmod +x "$work/callgrind"

# The agents, the baseline's server and its clients run under valgrind; each agent's and the
# server's counters are zeroed just before what is measured and dumped just after it.
AGENT_WRAPPER="$work/callgrind" AGENT_BEFORE="callgrind_control -z" AGENT_AFTER="callgrind_control -d" \
    TLS_SHORT=$short TLS_LONG=$long PROFILE_SECONDS="$seconds" "$work/AgentBenchmark" > "$work/out.txt" 2> "$work/err.txt" || {
    cat "$work/err.txt" >&2
    exit 2
}
grep -v '^==' "$work/err.txt" | grep -v '^$' >&2 || true

total() { grep -m1 '^totals:' "$1" | awk '{ print $2 }'; }
pids="$(grep -m1 "profile: A's agent" "$work/err.txt")"
pid_a="$(sed -E "s/.*A's agent ([0-9]+).*/\1/" <<< "$pids")"
pid_b="$(sed -E "s/.*B's agent ([0-9]+).*/\1/" <<< "$pids")"
count="$(grep -m1 -oE 'profile: [0-9]+ continuations' "$work/err.txt" | grep -oE '[0-9]+')"
clients=($(grep -oE 'TLS client [0-9]+' "$work/err.txt" | grep -oE '[0-9]+'))
server="$(grep -m1 -oE 'served by [0-9]+' "$work/err.txt" | grep -oE '[0-9]+')"
for file in "$work/cg.$pid_a.1" "$work/cg.$pid_b.1" "$work/cg.$server.1" "$work/cg.$server.2" "$work/cg.${clients[0]}" "$work/cg.${clients[1]}"; do
    [ -s "$file" ] || { echo "instructions.sh: callgrind wrote no $file" >&2; exit 2; }
done
a=$(( $(total "$work/cg.$pid_a.1") / count ))
b=$(( $(total "$work/cg.$pid_b.1") / count ))
tls_server=$(( ($(total "$work/cg.$server.2") - $(total "$work/cg.$server.1")) / (long - short) ))
tls_client=$(( ($(total "$work/cg.${clients[1]}") - $(total "$work/cg.${clients[0]}")) / (long - short) ))

machine="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores online, Linux $(uname -r)"
cat <<EOF
Instructions per warm continuation (callgrind, user space only: the kernel's work, the system calls and wake-ups, is not counted). Machine: $machine; $(valgrind --version). One run: counts of instructions, not times, move little between runs (docs/agent.md gives two runs' figures), and this run's spread is not measured.
$count warm continuations of a 3.1 KB userInfo, the origin app's save included, between two agents in the release build; the baseline: $((long - short)) exchanges of 3 KB each way on one kept TLS connection (the difference of a run of $long and one of $short).

| process | instructions per continuation (or exchange) |
| --- | --- |
| A's agent (origin) | $a |
| B's agent (continuing) | $b |
| baseline: TLS server, per exchange | $tls_server |
| baseline: TLS client, per exchange | $tls_client |
| both agents against both baseline processes | $(awk "BEGIN { printf \"%.1f×\", ($a + $b) / ($tls_server + $tls_client) }") |

EOF
# The functions' own instructions, read from the dumps as callgrind writes them (its annotate
# script misreads a dump taken after a zeroing), their names demangled.
self_costs() {
    python3 - "$1" "$count" <<'PY'
import collections, sys
costs, function, call = collections.Counter(), None, False
for line in open(sys.argv[1], errors="replace"):
    if line.startswith("fn="):
        function = line[3:].strip()
    elif line.startswith("calls="):
        call = True
    elif line[:1].isdigit() or line[:1] in "+-*":
        fields = line.split()
        if len(fields) >= 2 and function is not None:
            if call:
                call = False
            else:
                costs[function] += int(fields[1])
for name, cost in costs.most_common(12):
    print(f"{cost // int(sys.argv[2])}\t{name}")
PY
}
for side in A B; do
    pid="$pid_a"; [ "$side" = B ] && pid="$pid_b"
    echo "$side's agent, the functions with the most instructions of their own (per continuation):"
    echo
    echo "| instructions | function |"
    echo "| --- | --- |"
    self_costs "$work/cg.$pid.1" | while IFS=$'\t' read -r cost name; do
        # A recursive call's entry is named with a suffix ('2): the function's own name is before it.
        [[ "$name" == '$s'* ]] && name="$(swift demangle --simplified --compact "${name%\'*}")"
        printf '| %s | `%s` |\n' "$cost" "$(cut -c1-120 <<< "$name")"
    done
    echo
done

status=0
echo "| target | result | |"
echo "| --- | --- | --- |"
for side in A B; do
    value=$a; [ "$side" = B ] && value=$b
    if [ "$value" -le "$budget" ]; then verdict=met; else verdict="**MISSED**"; status=1; fi
    echo "| $side's agent ≤ $budget instructions per warm continuation | $value | $verdict |"
done
exit $status
