#!/usr/bin/env bash
# Runs Handoff's fuzz targets under libFuzzer with AddressSanitizer, each for a bounded number
# of executions or seconds, starting from the committed corpus in Fuzz/Corpus, and prints a
# table. A fault stops that target; its input is kept under .build-fuzz/faults/ with the
# command that replays it. Every fault found becomes a regression input: copy it to
# Fuzz/Corpus/TARGET/regress-WHAT, where the test suite runs it on every CI run.
#
#   Scripts/fuzz.sh                         every target, 1,000,000 executions each
#   Scripts/fuzz.sh --runs 100000 beacon    one target, fewer executions
#   Scripts/fuzz.sh --seconds 60            every target, a minute each
#   Scripts/fuzz.sh --forged-beacons 0      without the forged-beacon run
#
# Then (S3) it offers 10^7 forged beacons (--forged-beacons N) to the beacon opener and the
# replay guard (handoff-fuzz forge-beacons, the debug build the tests use: about 4 minutes),
# and fails if any opens.
#
# The first build compiles the whole stack with the sanitizers into .build-fuzz (about 30
# minutes on 2 cores; later builds only what changed).
set -euo pipefail
cd "$(dirname "$0")/.."

runs=1000000
seconds=0
forged=10000000
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) [ $# -ge 2 ] && [[ "$2" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: --runs needs a number of executions" >&2; exit 2; }; runs=$2; shift 2 ;;
    --seconds) [ $# -ge 2 ] && [[ "$2" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: --seconds needs a number of seconds" >&2; exit 2; }; seconds=$2; runs=-1; shift 2 ;;
    --forged-beacons) [ $# -ge 2 ] && [[ "$2" =~ ^[0-9]+$ ]] || { echo "fuzz.sh: --forged-beacons needs a number of beacons (0 for none)" >&2; exit 2; }; forged=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done

command -v swift >/dev/null 2>&1 || export PATH="/opt/swift/usr/bin:$PATH"
scratch=.build-fuzz
mkdir -p "$scratch"
echo "building handoff-fuzz with -sanitize=fuzzer,address into $scratch ..." >&2
swift build -c release --scratch-path "$scratch" --product handoff-fuzz \
  -Xswiftc -sanitize=fuzzer,address -Xswiftc -DHANDOFF_LIBFUZZER -Xswiftc -use-ld=lld >"$scratch/build.log" 2>&1 \
  || { tail -30 "$scratch/build.log" >&2; echo "fuzz.sh: the sanitized build failed (log: $scratch/build.log)" >&2; exit 1; }
binary="$scratch/release/handoff-fuzz"

all=(beacon dns-message link-frames account-change local-messages agent-local-messages user-info info-plist entitlements association-file signed-association-file config-file clipboard-files desktop-files dbus-message build-settings)
if [ ${#targets[@]} -eq 0 ]; then targets=("${all[@]}"); fi
for target in "${targets[@]}"; do
  [[ " ${all[*]} " == *" $target "* ]] || { echo "fuzz.sh: unknown target '$target'; the targets are: ${all[*]}" >&2; exit 2; }
done

mkdir -p "$scratch/faults"
printf '%-24s %14s %9s %10s %8s  %s\n' target executions seconds "exec/s" corpus result
total=0
failed=0
for target in "${targets[@]}"; do
  work="$scratch/corpus/$target"
  mkdir -p "$work"
  log="$scratch/fuzz-$target.log"
  max_len=8192
  [ "$target" = dns-message ] && max_len=9000
  start=$(date +%s.%N)
  set +e
  HANDOFF_FUZZ_TARGET="$target" SWIFT_BACKTRACE=enable=no ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1" LSAN_OPTIONS="suppressions=$PWD/Fuzz/lsan.supp" "$binary" \
    -runs="$runs" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$scratch/faults/$target-" "$work" "Fuzz/Corpus/$target" >"$log" 2>&1
  status=$?
  set -e
  end=$(date +%s.%N)
  executions=$( (grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" || true) | (grep -o '[0-9]*$' || true) | tail -1)
  executions=${executions:-0}
  corpus=$(find "$work" -type f | wc -l)
  elapsed=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  rate=$(awk -v n="$executions" -v s="$elapsed" 'BEGIN { printf "%.0f", (s > 0 ? n / s : 0) }')
  if [ $status -eq 0 ]; then
    result=clean
  else
    failed=$((failed + 1))
    fault=$( (grep -o "Test unit written to .*" "$log" || true) | sed 's/Test unit written to //' | tail -1)
    result="FAULT: ${fault:-see $log} (replay: swift run handoff-fuzz replay $target ${fault:-FILE})"
  fi
  total=$((total + executions))
  printf '%-24s %14s %9s %10s %8s  %s\n' "$target" "$executions" "$elapsed" "$rate" "$corpus" "$result"
done
printf '%-24s %14s\n' total "$total"
if [ "$forged" -gt 0 ]; then
  echo "building handoff-fuzz (debug, no sanitizers) for the forged-beacon run ..." >&2
  swift build --product handoff-fuzz >"$scratch/build-forge.log" 2>&1 \
    || { tail -30 "$scratch/build-forge.log" >&2; echo "fuzz.sh: the build failed (log: $scratch/build-forge.log)" >&2; exit 1; }
  if ! "$(swift build --show-bin-path)/handoff-fuzz" forge-beacons --count "$forged"; then
    echo "S3 broken: a forged beacon opened" >&2
    failed=$((failed + 1))
  fi
fi
if [ $failed -gt 0 ]; then
  echo "$failed target(s) found a fault; logs are in $scratch/fuzz-TARGET.log" >&2
  exit 1
fi
