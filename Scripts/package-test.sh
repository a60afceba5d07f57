#!/usr/bin/env bash
# The Debian packages, end to end, as root:
#   Scripts/package-test.sh
# Builds the packages (Scripts/package-deb.sh: handoff and handoff-examples) and a newer build
# of them, runs lintian, installs them with apt-get, and runs the installed programs as two new
# users on two hosts (network namespaces on one veth pair): an account, a device joining it,
# MapViewer signed and installed on both, a continuation from one to the other. Then installs
# the newer build over them and checks that the account, its devices and the apps are still
# there and still continue; then purges them and checks that no file they installed is left and
# each user's state is. Prints the packages' sizes, installed sizes and the time from `apt-get
# install` to the first continuation. Exits 77 (skipped) with the reason when it cannot run
# here: not root, no apt-get, no network namespaces, or a `handoff` package this test did not
# install.
#   Scripts/package-test.sh --prepare DIR
# only builds the packages the test installs into DIR, from the debug build (package-deb.sh
# --debug, after `swift build --build-tests`: relinks, about a minute for both versions, rather
# than a release build's ten); with HANDOFF_PACKAGE_TEST_PACKAGES=DIR the test then installs
# those rather than building release ones itself, if they were built from these sources.
# .ci/run does so before `swift test`, which must not relink .build while it runs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# What the packages are built from: the commit and a digest of the changes to tracked files.
source_state() {
  if git -C "$root" rev-parse HEAD >/dev/null 2>&1; then
    printf '%s %s\n' "$(git -C "$root" rev-parse HEAD)" "$(git -C "$root" diff HEAD | sha256sum | cut -c1-16)"
  else
    echo "not a git checkout"
  fi
}

# The packages: this version, and a newer build of it (its version with +test1), into $1 (with
# package-deb.sh's options after it): old.list and new.list hold their paths, build what build
# they are, source what they were built from.
build_packages() {
  local dir=$1 version option kind="a release build"; shift
  for option in "$@"; do [ "$option" = --debug ] && kind="a debug build"; done
  mkdir -p "$dir"
  # apt-get reads local packages as its own unprivileged user.
  chmod 755 "$dir"
  rm -f "$dir/build" "$dir/source"
  bash Scripts/package-deb.sh --output "$dir/old" "$@" > "$dir/old.list"
  version=$(dpkg-deb -f "$(tail -2 "$dir/old.list" | head -1)" Version)
  HANDOFF_VERSION="$version+test1" bash Scripts/package-deb.sh --output "$dir/new" "$@" > "$dir/new.list"
  source_state > "$dir/source"
  echo "$kind" > "$dir/build"
}
case "${1:-}" in
  --prepare)
    [ -n "${2:-}" ] || { echo "package-test.sh: --prepare needs a folder" >&2; exit 2; }
    build_packages "$2" --debug
    exit 0 ;;
  '') ;;
  *) echo "package-test.sh: unknown argument '$1' (none runs the test; --prepare DIR builds its packages)" >&2; exit 2 ;;
esac

skip() { echo "package test skipped: $*" >&2; exit 77; }
say() { printf '\n== %s\n' "$*" >&2; }
fail() { echo "package test FAILED: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || skip "it installs a package system-wide and makes network namespaces and users, which needs root"
for tool in apt-get dpkg-deb dpkg-shlibdeps ip runuser useradd pkill pgrep mkfifo strip cc; do
  command -v "$tool" >/dev/null 2>&1 || skip "$tool is missing (.ci/run installs what it needs)"
done
command -v lintian >/dev/null 2>&1 || skip "lintian is missing (apt-get install lintian; .ci/run installs it)"
marker=/var/lib/handoff-package-test
if [ "$(dpkg-query -W -f='${db:Status-Status}' handoff 2>/dev/null)" = installed ] && [ ! -e "$marker" ]; then
  skip "a handoff package is installed on this machine and this test did not install it: it would replace it"
fi
ip netns add handoff-pkg-probe 2>/dev/null || skip "cannot make a network namespace here"
ip netns del handoff-pkg-probe

work=$(mktemp -d /tmp/handoff-package-test.XXXXXX)
chmod 755 "$work"
hosts=(alpha beta)
cleanup() {
  set +e
  for host in "${hosts[@]}"; do
    pkill -KILL -u "hopkg-$host" 2>/dev/null
    ip netns del "hopkg-$host" 2>/dev/null
  done
  sleep 0.2
  for host in "${hosts[@]}"; do userdel -f "hopkg-$host" 2>/dev/null; done
  if [ -e "$marker" ]; then DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq handoff handoff-examples >/dev/null 2>&1; rm -f "$marker"; fi
  rm -rf "$work"
}
trap cleanup EXIT

# -- The packages: this version, and a newer build of it (its version with +test1).
packages=${HANDOFF_PACKAGE_TEST_PACKAGES:-}
if [ -n "$packages" ]; then
  [ -s "$packages/old.list" ] && [ -s "$packages/new.list" ] && [ -s "$packages/build" ] \
    || fail "HANDOFF_PACKAGE_TEST_PACKAGES=$packages holds no packages from Scripts/package-test.sh --prepare"
  [ "$(cat "$packages/source" 2>/dev/null)" = "$(source_state)" ] \
    || fail "the packages in $packages were built from other sources than these: run Scripts/package-test.sh --prepare $packages again"
  say "the packages built before the test ($(cat "$packages/build")) in $packages"
else
  packages=$work/packages
  say "building the package and a newer build of it (release)"
  build_packages "$packages"
fi
mapfile -t old < <(tail -2 "$packages/old.list")
deb=${old[0]}
version=$(dpkg-deb -f "$deb" Version)
mapfile -t new < <(tail -2 "$packages/new.list")
for package in "${new[@]}"; do
  [ "$(dpkg-deb -f "$package" Version)" = "$version+test1" ] || fail "the newer build of $package is version $(dpkg-deb -f "$package" Version)"
done

say "lintian"
lintian --fail-on error,warning --display-level ">=warning" "${old[@]}" >&2 || fail "lintian found errors or warnings (above)"

# -- Two hosts, each with a user of its own, on one link. Multicast stays inside them.
say "two hosts, alpha and beta, each with a new user"
ip netns add hopkg-alpha
ip netns add hopkg-beta
ip -n hopkg-alpha link add eth0 type veth peer name eth0 netns hopkg-beta
for n in 1 2; do
  host=${hosts[$((n - 1))]}
  ip -n "hopkg-$host" addr add "10.79.0.$n/24" dev eth0
  ip -n "hopkg-$host" link set eth0 up multicast on
  ip -n "hopkg-$host" link set lo up
  useradd --create-home --home-dir "$work/home-$host" --shell /bin/sh "hopkg-$host"
  install -d -m 700 -o "hopkg-$host" "$work/home-$host/run"
done

# Runs a command as HOST's user on HOST, with that user's environment, as a login would.
as() {
  local host=$1; shift
  ip netns exec "hopkg-$host" runuser -u "hopkg-$host" -- env -i PATH=/usr/bin:/bin HOME="$work/home-$host" \
    XDG_RUNTIME_DIR="$work/home-$host/run" LANG=C.UTF-8 "$@"
}
start_agent() {
  local host=$1
  rm -f "$work/home-$host/run/handoff/agent.sock"
  as "$host" handoffd --name "$host" --log-level warning >> "$work/$host-handoffd.log" 2>&1 &
  for _ in $(seq 100); do [ -S "$work/home-$host/run/handoff/agent.sock" ] && return 0; sleep 0.1; done
  cat "$work/$host-handoffd.log" >&2; fail "handoffd on $host did not start"
}
stop_agent() {
  local host=$1
  pkill -TERM -u "hopkg-$host" -x handoffd || true
  for _ in $(seq 100); do pgrep -u "hopkg-$host" -x handoffd >/dev/null || return 0; sleep 0.1; done
  fail "handoffd on $host did not stop on SIGTERM"
}
wait_for() {
  local what=$1; shift
  for _ in $(seq 300); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  fail "timed out waiting for $what"
}
state() { echo "$work/home-$1/.local/state/handoff"; }

# The MapViewer example on HOST, as its person would open it, reading commands from a FIFO.
open_mapviewer() {
  local host=$1
  rm -f "$work/$host.in"; mkfifo -m 666 "$work/$host.in"
  install -d -m 755 -o "hopkg-$host" "$work/$host-data"
  as "$host" HANDOFF_APP_DATA="$work/$host-data" "$(state "$host")/apps/com.example.handoff.MapViewer/MapViewer" \
    < "$work/$host.in" >> "$work/$host-MapViewer.log" 2>&1 &
  mapviewer=$!
  exec 7> "$work/$host.in"
}
tell() {
  kill -0 "$mapviewer" 2>/dev/null || { cat "$work/"*-MapViewer.log >&2; fail "MapViewer ended before '$1'"; }
  echo "$1" >&7
}
continued() { grep -q "^map shows" "$(state beta)/data/com.example.handoff.MapViewer/events.log"; }
beta_sees_alpha() { as beta handoff devices | grep -q nearby; }
beta_lists_the_map() { as beta handoff list | grep -q 'Viewing the store map'; }
quit_apps() {
  exec 7>&- || true
  for host in "${hosts[@]}"; do pkill -TERM -u "hopkg-$host" -x MapViewer || true; done
  sleep 0.3
}

# -- Install, pair, continue.
say "apt-get install $(basename "${old[0]}") $(basename "${old[1]}")"
touch "$marker"
start=$(date +%s.%N)
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${old[@]}" >&2 || fail "apt-get install"
installed=$(date +%s.%N)
dpkg -L handoff handoff-examples | sort -u > "$work/files"
[ "$(handoff --version)" = "$version" ] || fail "handoff --version says $(handoff --version), the package $version"
[ "$(handoffd --version)" = "$version" ] || fail "handoffd --version says $(handoffd --version)"
[ -L /etc/systemd/user/default.target.wants/handoffd.service ] || fail "the agent's user unit is not enabled for every user"
[ -L /etc/systemd/user/graphical-session.target.wants/handoff-session.service ] || fail "the session's user unit is not enabled"
for page in handoff handoff-account-create handoff-continue handoffd; do
  [ -e "/usr/share/man/man1/$page.1.gz" ] || fail "no manual page $page(1)"
done
[ -e /usr/share/bash-completion/completions/handoff ] || fail "no bash completion for handoff"
grep -Eq '"path" ?: ?"/usr/libexec/handoff/handoff-browser-host"' /etc/chromium/native-messaging-hosts/org.handoff.browser.json \
  || fail "Chromium's native-messaging manifest does not name the installed host"

say "pairing alpha and beta, as their users"
for host in "${hosts[@]}"; do start_agent "$host"; done
as alpha handoff account create --name home >&2
token=$(as alpha handoff device invite --token --expires 2m | tail -1)
# The token goes on standard input: a command line is readable by every user of the machine.
printf '%s\n' "$token" | as beta handoff join - >&2
wait_for "beta to see alpha nearby" beta_sees_alpha

say "MapViewer signed with a new team key, installed on both"
app=$work/home-alpha/MapViewer.app
cp -R /usr/lib/handoff/examples/MapViewer.app "$app"; chown -R hopkg-alpha "$app"
as alpha handoff team create --key "$work/home-alpha/team.key" >&2
team=$(as alpha handoff team show --key "$work/home-alpha/team.key")
sed -i "s/EXAMPLETEAM/$team/" "$app/MapViewer.entitlements"
as alpha handoff apps sign "$app" --key "$work/home-alpha/team.key" >&2
cp -R "$app" "$work/home-beta/MapViewer.app"; chown -R hopkg-beta "$work/home-beta/MapViewer.app"
as alpha handoff apps install "$app" >&2
as beta handoff apps install "$work/home-beta/MapViewer.app" >&2

say "the map on alpha, continued on beta"
open_mapviewer alpha
tell "show 37.7887 -122.4075 0.02"
wait_for "beta to list alpha's map" beta_lists_the_map
as beta handoff continue --latest >&2
wait_for "MapViewer on beta to show the map" continued
first=$(date +%s.%N)
grep "^map shows" "$(state beta)/data/com.example.handoff.MapViewer/events.log" >&2

# -- A newer build over it, while the agents run; they pick it up when they restart.
say "apt-get install $(basename "${new[0]}") $(basename "${new[1]}") over it"
quit_apps
account=$(sha256sum < "$(state alpha)/account.json")
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${new[@]}" >&2 || fail "apt-get install of the newer build"
[ "$(handoff --version)" = "$version+test1" ] || fail "after the upgrade handoff --version says $(handoff --version)"
[ -L /etc/systemd/user/default.target.wants/handoffd.service ] || fail "the upgrade turned the agent's unit off"
for host in "${hosts[@]}"; do stop_agent "$host"; start_agent "$host"; done
for host in "${hosts[@]}"; do
  as "$host" handoff status --json | grep -qF "\"$version+test1\"" || fail "$host's agent is not the newer build: $(as "$host" handoff status --json)"
done
for host in "${hosts[@]}"; do
  as "$host" handoff devices | grep -q "alpha" || fail "$host lost alpha from the account"
  as "$host" handoff devices | grep -q "beta" || fail "$host lost beta from the account"
  as "$host" handoff apps | grep -q "com.example.handoff.MapViewer" || fail "$host lost MapViewer"
done
wait_for "beta to see alpha again" beta_sees_alpha
rm -f "$(state beta)/data/com.example.handoff.MapViewer/events.log"
open_mapviewer alpha
tell "show 37.7255 -122.4762 0.02"
wait_for "beta to list alpha's map again" beta_lists_the_map
as beta handoff continue --latest >&2
wait_for "MapViewer on beta to show the map after the upgrade" continued
grep "^map shows" "$(state beta)/data/com.example.handoff.MapViewer/events.log" >&2

# -- Purge: nothing of the package is left; each user's state is.
say "apt-get purge handoff handoff-examples"
quit_apps
for host in "${hosts[@]}"; do stop_agent "$host"; done
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq handoff handoff-examples >&2 || fail "apt-get purge"
rm -f "$marker"
left=()
while read -r path; do
  if [ -d "$path" ] && [ ! -L "$path" ]; then
    # A folder may stay only if another package has it too, or something not ours is in it.
    dpkg -S "$path" >/dev/null 2>&1 || [ -n "$(ls -A "$path")" ] || left+=("$path")
  elif [ -e "$path" ] || [ -L "$path" ]; then
    left+=("$path")
  fi
done < "$work/files"
for link in /etc/systemd/user/default.target.wants/handoffd.service /etc/systemd/user/graphical-session.target.wants/handoff-session.service \
  /etc/systemd/user/handoffd.service /etc/systemd/user/handoff-session.service; do
  [ -L "$link" ] && left+=("$link")
done
# deb-systemd-helper's own records of the links it made.
for record in /var/lib/systemd/deb-systemd-user-helper-enabled/*handoff* /var/lib/systemd/deb-systemd-user-helper-masked/*handoff*; do
  [ -e "$record" ] && left+=("$record")
done
[ ${#left[@]} -eq 0 ] || fail "purge left: ${left[*]}"
[ "$(sha256sum < "$(state alpha)/account.json")" = "$account" ] || fail "purge changed alpha's account"
for host in "${hosts[@]}"; do
  [ -d "$(state "$host")/apps/com.example.handoff.MapViewer" ] || fail "purge removed $host's installed app"
done

say "done"
echo "the packages: $(cat "$packages/build")"
for package in "${old[@]}"; do
  printf 'package: %s, %s KiB; installed: %s KiB\n' "$(basename "$package")" "$(du -k "$package" | cut -f1)" "$(dpkg-deb -f "$package" Installed-Size)"
done
awk -v s="$start" -v i="$installed" -v f="$first" \
  'BEGIN { printf "apt-get install: %.1f s; from apt-get install to the first continuation between two hosts: %.1f s\n", i - s, f - s }'
