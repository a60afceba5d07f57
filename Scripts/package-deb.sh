#!/usr/bin/env bash
# Builds the Debian packages handoff_VERSION_ARCH.deb and handoff-examples_VERSION_ARCH.deb
# from this checkout, with dpkg-deb:
#   Scripts/package-deb.sh [--output DIR] [--debug]
# A release build with the Swift runtime linked in statically (the target machine needs no
# toolchain), man pages from swift-argument-parser's generate-manual, completions from
# the programs themselves, and the files in Packaging/. The version is the programs' own
# (Sources/CHandoffVersion); HANDOFF_VERSION=X builds version X instead (the package test's
# upgrade). Prints the two packages' paths on its last two lines: handoff, then
# handoff-examples (the MapViewer example). docs/operations.md (The Debian package) says what
# goes where and why.
# --debug links handoff-programs and MapViewer from the debug build in .build (what
# `swift build` made: run it first) instead of a release build, for tests of the package
# (.ci/run): a relink of about 15 s rather than a ten-minute build. Larger, slower code: not a
# package to ship. The `handoff` front is still its small release build (.build-package-static,
# about 15 s from nothing). It relinks .build's programs in place; the next `swift build` links
# them back (this package's products, not generate-manual, which only this script uses).
set -euo pipefail
# What the files' modes are made from, whatever the builder's own umask (dh_fixperms, below).
umask 022
cd "$(dirname "$0")/.."
root=$PWD
output=$root
debug=no
while [ $# -gt 0 ]; do
  case "$1" in
    --output) output=$2; shift 2 ;;
    --debug) debug=yes; shift ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "package-deb.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for tool in dpkg-deb dpkg-shlibdeps fakeroot; do
  if [ "$tool" = fakeroot ] && [ "$(id -u)" = 0 ]; then continue; fi
  [ "$tool" = fakeroot ] && from=fakeroot || from=dpkg-dev
  command -v "$tool" >/dev/null 2>&1 || { echo "package-deb.sh needs $tool (apt-get install $from)" >&2; exit 1; }
done
command -v swift >/dev/null 2>&1 || export PATH="/opt/swift/usr/bin:$PATH"
mkdir -p "$output"; output=$(cd "$output" && pwd)

# Two build folders beside the developer's .build: the release programs, and `handoff` as a
# static executable (it starts in about a millisecond: docs/agent.md, Installing).
build=$root/.build-package
# The agent's functions grouped as it runs them (Scripts/release-flags.sh, Scripts/handoffd.order).
flags=(-c release -Xswiftc -static-stdlib -Xswiftc -Xfrontend -Xswiftc -function-sections -Xcxx -ffunction-sections -Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs -Xlinker --no-export-dynamic
  -Xlinker -z -Xlinker now -Xlinker "--symbol-ordering-file=$root/Scripts/handoffd.order" -Xlinker --no-warn-symbol-ordering
  -Xlinker -T -Xlinker "$root/Scripts/handoffd-hot.ld")
static=(-c release -Xswiftc -static-executable -Xswiftc -use-ld=lld --scratch-path "$build-static")
if [ "$debug" = yes ]; then
  # The debug build's objects, compiled for the shared Swift runtime, linked against the static
  # one: only the links run again (when the debug build is up to date; a module that is not is
  # compiled here, and again by the next `swift build`). Its modules name Foundation's libraries but not what those
  # need in their static form, which -static-stdlib at compile time would add: named here, in a
  # group. ld.gold links (-z pack-relative-relocs needs lld, which -use-ld would recompile for).
  build=$root/.build
  flags=(--static-swift-stdlib -Xlinker --start-group)
  for library in Foundation FoundationEssentials FoundationInternationalization CoreFoundation _FoundationCShims _FoundationCollections _FoundationICU; do
    flags+=(-Xlinker "-l$library")
  done
  flags+=(-Xlinker --end-group -Xlinker --no-export-dynamic -Xlinker -z -Xlinker now)
fi

say() { echo "package-deb.sh: $*" >&2; }

# The changelog's date dates the manual pages and every file, so that the same sources give
# the same package (SOURCE_DATE_EPOCH, as Debian's reproducible builds do).
changelog=$root/Packaging/debian/changelog
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(date -d "$(sed -n 's/^ -- .*>  //p' "$changelog" | head -1)" +%s)}
day=$(date -u -d "@$SOURCE_DATE_EPOCH" +%F)

stage=$(mktemp -d "${TMPDIR:-/tmp}/handoff-deb.XXXXXX")
trap 'rm -rf "$stage"' EXIT

if [ -n "${HANDOFF_VERSION:-}" ]; then
  # A build of another version (the package test's upgrade): the programs are linked with a
  # handoff_version() that returns it (ld --wrap), so that only the linker runs again; a
  # change to Sources/CHandoffVersion recompiles every module that shows the version.
  case "$HANDOFF_VERSION" in *[!A-Za-z0-9.+~-]*|'') say "HANDOFF_VERSION '$HANDOFF_VERSION' is not a Debian version"; exit 2 ;; esac
  mkdir -p "$build"
  override=$build/version-$HANDOFF_VERSION.o
  printf 'const char *__wrap_handoff_version(void) { return "%s"; }\n' "$HANDOFF_VERSION" > "$stage/version.c"
  cc -c -O2 -fPIC -o "$override" "$stage/version.c"
  flags+=(-Xlinker --wrap=handoff_version -Xlinker "$override")
fi

say "building the programs ($([ "$debug" = yes ] && echo "debug build relinked" || echo release), static Swift runtime) in $build"
for product in handoff-programs MapViewer generate-manual; do
  swift build --scratch-path "$build" "${flags[@]}" --product "$product" >&2
done
swift build "${static[@]}" --product handoff >&2
bin=$(swift build --scratch-path "$build" "${flags[@]}" --show-bin-path)
front=$(swift build "${static[@]}" --show-bin-path)/handoff

mkdir -p "$stage/names"
ln -sf "$bin/handoff-programs" "$stage/names/handoffd"
version=$("$stage/names/handoffd" --version)
if [ -z "${HANDOFF_VERSION:-}" ] && ! head -1 "$changelog" | grep -qF "handoff ($version)"; then
  say "the programs are version $version but Packaging/debian/changelog's newest entry is $(head -1 "$changelog"): add an entry for $version"
  exit 1
fi
arch=$(dpkg --print-architecture)
say "packaging Handoff $version for $arch"

tree=$stage/tree
examples=$stage/examples
install -d -m 755 "$tree"/{DEBIAN,usr/bin,usr/libexec/handoff,usr/lib/systemd/user,etc/xdg/autostart,etc/chromium/native-messaging-hosts} \
  "$tree"/usr/lib/mozilla/native-messaging-hosts "$examples"/{DEBIAN,usr/lib/handoff/examples/MapViewer.app,usr/share/doc/handoff-examples} \
  "$tree"/usr/share/{man/man1,bash-completion/completions,zsh/vendor-completions,fish/vendor_completions.d,lintian/overrides} \
  "$tree"/usr/share/doc/handoff/docs "$tree"/usr/share/handoff

# Programs: what a person types in /usr/bin, what only other programs start in libexec. All but
# the `handoff` front are one binary, handoff-programs, which is each by the name it is started
# by: five programs of their own would each carry the Swift runtime, Foundation and ICU's data
# (55-75 MB each, 311 MB installed). Stripped as dh_strip does (no symbol table; Swift's
# metadata stays, so that scene delegates are still found by name).
strip_into() { install -m 755 "$1" "$2"; strip --remove-section=.comment --remove-section=.note "$2/$(basename "$1")"; }
strip_into "$bin/handoff-programs" "$tree/usr/libexec/handoff"
strip_into "$front" "$tree/usr/bin"
ln -s handoff-programs "$tree/usr/libexec/handoff/handoff-cli"
ln -s handoff-programs "$tree/usr/libexec/handoff/handoff-browser-host"
ln -s ../libexec/handoff/handoff-programs "$tree/usr/bin/handoffd"
ln -s handoff-programs "$tree/usr/libexec/handoff/handoff-session"
[ "$("$tree/usr/bin/handoffd" --version)" = "$version" ] && [ "$("$tree/usr/libexec/handoff/handoff-cli" --version)" = "$version" ] \
  || { say "the staged programs do not say version $version"; exit 1; }

# The MapViewer example, as an app folder to sign and install (README), in a package of its own,
# handoff-examples, as Debian ships examples: the app carries its own Swift runtime (57 MB).
strip_into "$bin/MapViewer" "$examples/usr/lib/handoff/examples/MapViewer.app"
install -m 644 Examples/MapViewer/App/* "$examples/usr/lib/handoff/examples/MapViewer.app/"

# Services: the agent for every user, the session service for graphical sessions.
install -m 644 Packaging/handoffd.service Packaging/handoff-session.service "$tree/usr/lib/systemd/user/"
install -m 644 Packaging/handoff-session.desktop "$tree/etc/xdg/autostart/"

# The browser's native-messaging host, where Chromium and Firefox look for every user.
"$tree/usr/libexec/handoff/handoff-cli" browser install --system --root "$tree" --host /usr/libexec/handoff/handoff-browser-host --browser chromium --browser firefox >&2
cp -R Extensions/Browser "$tree/usr/share/handoff/browser-extension"

# Manual pages by swift-argument-parser's generate-manual, the tool its plugin runs. Run here on
# our two commands: the plugin builds every target in release first and then runs every
# executable that links the parser with --experimental-dump-help, which the benchmarks do not
# read (they would run). Completions from the programs themselves.
for program in usr/libexec/handoff/handoff-cli usr/bin/handoffd; do
  name=$(basename "$program"); name=${name%-cli}
  mkdir -p "$stage/manuals/$name"
  "$bin/generate-manual" "$tree/$program" --multi-page --date "$day" --authors "Handoff developers<handoff@handoff.invalid>" \
    --output-directory "$stage/manuals/$name" >&2
  for page in "$stage/manuals/$name"/*.1; do
    # handoff.account.create.1 documents "handoff account create": installed as
    # handoff-account-create(1), a name whatis can read (Packaging/manual.awk).
    command=$(basename "$page" .1); command=${command//./ }
    awk -v name="$command" -f Packaging/manual.awk "$page" | gzip -9n > "$tree/usr/share/man/man1/${command// /-}.1.gz"
  done
  # The bash completion is sourced, not run: no #! line.
  "$tree/$program" --generate-completion-script bash | sed '1{/^#!/d}' > "$tree/usr/share/bash-completion/completions/$name"
  "$tree/$program" --generate-completion-script zsh > "$tree/usr/share/zsh/vendor-completions/_$name"
  "$tree/$program" --generate-completion-script fish > "$tree/usr/share/fish/vendor_completions.d/$name.fish"
done

# Documentation and licence: larger files compressed, as dh_compress does.
doc=$tree/usr/share/doc/handoff
install -m 644 README.md "$doc/"
install -m 644 docs/*.md "$doc/docs/"
install -m 644 Packaging/debian/copyright "$doc/copyright"
gzip -9n < "$changelog" > "$doc/changelog.gz"
if [ -n "${HANDOFF_VERSION:-}" ] && ! head -1 "$changelog" | grep -q "($version)"; then
  # A build of another version (the package test's upgrade) says so in its changelog.
  { printf 'handoff (%s) unstable; urgency=medium\n\n  * A build of version %s from %s.\n\n -- Handoff developers <handoff@handoff.invalid>  %s\n\n' \
      "$version" "$version" "$(git -C "$root" describe --always --dirty 2>/dev/null || echo 'this checkout')" "$(date -u -R -d "@$SOURCE_DATE_EPOCH")"
    cat "$changelog"; } | gzip -9n > "$doc/changelog.gz"
fi
find "$doc" -type f -name '*.md' -size +4k -exec gzip -9n {} +
install -m 644 Packaging/debian/lintian-overrides "$tree/usr/share/lintian/overrides/handoff"

install -m 644 Packaging/debian/copyright "$examples/usr/share/doc/handoff-examples/copyright"
cp "$doc/changelog.gz" "$examples/usr/share/doc/handoff-examples/changelog.gz"
install -m 755 Packaging/debian/postinst Packaging/debian/postrm "$tree/DEBIAN/"
find "$tree/etc" -type f | sed "s|^$tree||" | sort > "$tree/DEBIAN/conffiles"
chmod 644 "$tree/DEBIAN/conffiles"

# Control, the checksums and the package: Depends holds the libraries the programs link, found
# as dpkg-shlibdeps finds them.
mkdir -p "$stage/debian" && printf 'Source: handoff\n\nPackage: handoff\nArchitecture: any\n' > "$stage/debian/control"
build_package() {
  local tree=$1 name=$2 template=$3; shift 3
  local binaries=() file
  for file in "$@"; do binaries+=("-e$tree/$file"); done
  local depends size
  depends=$(cd "$stage" && dpkg-shlibdeps -O "${binaries[@]}" | sed -n 's/^shlibs:Depends=//p')
  [ -n "$depends" ] || { say "dpkg-shlibdeps found no libraries for $name"; exit 1; }
  # Modes as dh_fixperms leaves them: folders and programs 755, everything else 644.
  chmod -R u+rwX,go=rX "$tree"
  size=$(du -k -s --exclude=DEBIAN "$tree" | cut -f1)
  sed -e "s/@VERSION@/$version/g" -e "s/@ARCH@/$arch/" -e "s/@INSTALLED_SIZE@/$size/" -e "s/@DEPENDS@/$depends/" \
    "$template" > "$tree/DEBIAN/control"
  (cd "$tree" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z | xargs -0 md5sum > DEBIAN/md5sums)
  chmod 644 "$tree/DEBIAN/md5sums" "$tree/DEBIAN/control"
  find "$tree" -newermt "@$SOURCE_DATE_EPOCH" -print0 | xargs -0 -r touch -h -d "@$SOURCE_DATE_EPOCH"
  local deb=$output/${name}_${version}_${arch}.deb
  # xz at dpkg-deb's level (6); a test's package (--debug) at level 1: 5 s rather than 40 s.
  local compression=(-Zxz)
  [ "$debug" = yes ] && compression+=(-z1)
  if [ "$(id -u)" = 0 ]; then
    dpkg-deb --root-owner-group "${compression[@]}" --build "$tree" "$deb" >&2
  else
    fakeroot dpkg-deb --root-owner-group "${compression[@]}" --build "$tree" "$deb" >&2
  fi
  say "$name: $(du -h "$deb" | cut -f1) package, $size KiB installed"
  echo "$deb"
}
build_package "$tree" handoff Packaging/debian/control usr/libexec/handoff/handoff-programs usr/bin/handoff
build_package "$examples" handoff-examples Packaging/debian/control-examples usr/lib/handoff/examples/MapViewer.app/MapViewer
