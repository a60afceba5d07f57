#!/usr/bin/env bash
# Writes Scripts/handoffd.order: the functions handoffd runs, for the linker to put together
# (lld's --symbol-ordering-file; docs/agent.md, Installing). The kernel maps an executable's
# code 64 KB around every page that runs, so code spread over the file's 28 MB keeps most of
# it resident; grouped, what an agent runs fits in a few megabytes. Measured with callgrind
# on two agents in Benchmarks/AgentBenchmark's profile mode: first what they run idle (60 s,
# an activity offered, the link open), then what warm continuations add, then what
# continuations on new links add (the connection, the handshakes, the proofs: a continuation
# after quiet), then the rest of what they ran (starting, pairing, discovery), each part
# sorted by name. Between the continuations' code and the rest, `handoff_hot_code_end`: an
# idle release keeps what comes before it mapped.
# A function the list does not name (new or renamed since) still links, among the rest.
# Needs valgrind and root (two network namespaces; loopback otherwise). Run it after changes
# that rename much of the agent's code, and commit the file.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
command -v swift >/dev/null 2>&1 || export PATH="/opt/swift/usr/bin:$PATH"
command -v valgrind >/dev/null 2>&1 || { echo "hot-code.sh needs valgrind (apt-get install valgrind)" >&2; exit 2; }
source Scripts/release-flags.sh
for product in AgentBenchmark handoffd handoff-cli; do swift build "${unordered_flags[@]}" --product "$product" >&2; done
bin="$(swift build "${unordered_flags[@]}" --show-bin-path)"
work="$(mktemp -d /tmp/handoff-hot-code.XXXXXX)"
[ -n "${KEEP_WORK:-}" ] || trap 'rm -rf "$work"' EXIT
# valgrind 3.19 cannot read clang's DWARF 5: copies without it (the symbol table stays).
for program in AgentBenchmark handoffd handoff-cli; do objcopy --strip-debug "$bin/$program" "$work/$program"; done
cat > "$work/callgrind" <<WRAP
#!/bin/sh
exec valgrind --tool=callgrind --demangle=no --compress-strings=no --compress-pos=no --dump-line=no --dump-instr=yes --callgrind-out-file=$work/cg.%p "\$@"
WRAP
# After the warm continuations: each agent dumps (its second part), and once both have, they
# idle for IDLE_SECONDS and dump again (the third).
cat > "$work/after" <<AFTER
#!/bin/sh
callgrind_control -d "\$1" > /dev/null
echo "\$1" >> $work/pids
if [ "\$(wc -l < $work/pids)" = 2 ]; then
  sleep ${IDLE_SECONDS:-60}
  for pid in \$(cat $work/pids); do callgrind_control -d "\$pid" > /dev/null; done
fi
AFTER
chmod +x "$work/callgrind" "$work/after"
AGENT_WRAPPER="$work/callgrind" AGENT_BEFORE="callgrind_control -d" AGENT_AFTER="$work/after" PROFILE_SECONDS="${PROFILE_SECONDS:-15}" \
    PROFILE_NEW_LINKS="${NEW_LINKS:-10}" AGENT_AFTER_NEW_LINKS="callgrind_control -d" \
    "$work/AgentBenchmark" > "$work/out.txt" 2> "$work/err.txt" || { cat "$work/err.txt" >&2; exit 2; }
python3 - "$work" "$root/Scripts/handoffd.order" <<'PY'
import bisect, glob, os, re, subprocess, sys
from collections import Counter
work, output = sys.argv[1], sys.argv[2]
def symbols(path):
    """The functions of `path`'s symbol table, by address."""
    table = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    found = sorted((int(fields[0], 16), fields[2]) for fields in (line.split() for line in table.splitlines())
                   if len(fields) == 3 and fields[1] in "tTwW")
    return [address for address, _ in found], [name for _, name in found]
addresses, names_at = symbols(os.path.join(work, "handoffd"))
by_name = dict(zip(names_at, addresses))
def functions(files):
    # Every instruction handoffd ran, named by the function it lies in (its symbol table), not
    # by callgrind's own `fn=` names, which are the functions callgrind took to be running (two
    # profiles run one after the other: 1,638 functions idle by address, 1,586 by those names).
    ran, first = set(), {}
    for file in files:
        image, function = None, None
        for line in open(file, errors="replace"):
            if line.startswith("ob="):
                image = os.path.basename(line[3:].strip())
            elif line.startswith("fn="):
                function = re.sub(r"'\d+$", "", line[3:].strip()) if image == "handoffd" else None
            elif function and line.startswith("0x"):
                address = int(line.split(None, 1)[0], 16)
                ran.add(address)
                if address < first.get(function, address + 1):
                    first[function] = address
    if not ran:
        return set()
    # Where valgrind loaded the program: the offset most functions' first instruction run has
    # from its address in the file.
    offsets = Counter((address - by_name[name]) & ~0xFFF for name, address in first.items() if name in by_name)
    base = offsets.most_common(1)[0][0]
    found = set()
    for address in ran:
        index = bisect.bisect_right(addresses, address - base) - 1
        if index >= 0:
            found.add(names_at[index])
    return found
dumps = sorted(glob.glob(os.path.join(work, "cg.*")))
part = lambda n: [d for d in dumps if d.endswith(f".{n}")]
idle = functions(part(3))
warm = functions(part(2)) - idle
fresh = functions(part(4)) - idle - warm
rest = functions(part(1) + [d for d in dumps if re.search(r"cg\.\d+$", d)]) - idle - warm - fresh
if not idle or not warm or not fresh:
    sys.exit("hot-code.sh: callgrind's dumps hold no idle, no warm or no new-link functions")
with open(output, "w") as out:
    out.write("# Written by Scripts/hot-code.sh: the functions handoffd runs idle, then on a warm\n")
    out.write("# continuation, then on one that opens a new link, then the rest it ran, for lld's\n")
    out.write("# --symbol-ordering-file.\n")
    for group in (idle, warm, fresh):
        out.writelines(name + "\n" for name in sorted(group))
    # The end of the hot code, which an idle release keeps mapped (IdleMemory.hotCodeEnd).
    out.write("handoff_hot_code_end\n")
    out.writelines(name + "\n" for name in sorted(rest - {"handoff_hot_code_end"}))
print(f"Scripts/handoffd.order: {len(idle)} functions idle, {len(warm)} more warm, {len(fresh)} more on a new link, {len(rest)} more in all")
PY
# Only functions that move alone stay in the list (Scripts/order-sections.py): lld's map of a
# link without the order says which section it took each from, and the objects built here and
# the toolchain's static libraries the programs link, for what the map does not list; the
# objects are checked for sections of their own.
swift build "${unordered_flags[@]}" -Xlinker "-Map=$work/handoffd.map" --product handoffd >&2
static_libs="$(dirname "$(command -v swift)")/../lib/swift_static/linux"
python3 Scripts/order-sections.py --script "$root/Scripts/handoffd-hot.ld" "$root/Scripts/handoffd.order" "$work/handoffd.map" \
    $(find "$bin" -name '*.o' -path '*.build/*' ! -path '*Tests*' ! -path '*Benchmark*') "$static_libs"/*.a
# SwiftPM does not know the list is an input of the link: the next release build links anew.
rm -f "$bin/handoffd"
