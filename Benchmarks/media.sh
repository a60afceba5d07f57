#!/usr/bin/env bash
# The media benchmark: a media item (mpv with its MPRIS plugin) continued from one device to
# another, from `handoff continue` to the other device's player playing at the position, beside
# the same player started there on the file by hand (the floor); and the session service's idle
# cost with no player running, with its session bus and without it (as before media). Two
# handoffd processes, as root in two network namespaces on a bridge it makes (and removes),
# otherwise on loopback; each host's session bus is a dbus-daemon of its own. Runs repeat until
# their medians agree within 10 %. Prints Markdown tables; exits 1 if a target is missed.
# Needs mpv, mpv-mpris and dbus-daemon (apt-get install mpv mpv-mpris dbus-daemon).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v swift >/dev/null 2>&1 || export PATH="/opt/swift/usr/bin:$PATH"
source Scripts/release-flags.sh
flags=("${release_flags[@]}")
for product in AgentBenchmark handoffd handoff-session; do swift build "${flags[@]}" --product "$product" >&2; done
exec "$(swift build "${flags[@]}" --show-bin-path)/AgentBenchmark" media
