# The release build's flags, as docs/agent.md (Installing) builds the programs and the
# benchmarks measure them: the Swift runtime and Foundation linked in; lld with packed relative
# relocations and no exported symbols, so that starting touches little of the file; and the
# agent's functions grouped in the order of Scripts/handoffd.order (Scripts/hot-code.sh), so
# that what it runs shares pages: each function compiled into a section of its own
# (-function-sections for Swift, -ffunction-sections for BoringSSL's C++), which is what the
# linker moves, and what no symbol can name put ahead of them (Scripts/handoffd-hot.ld).
# Objects built before these flags keep their old sections (the Swift compiler does not make
# an object again when its code is unchanged): after changing them, build from a clean folder.
# Sourced from the package's root: sets release_flags, and unordered_flags (the same without
# the order and the script, which hot-code.sh builds with to write the order).
unordered_flags=(-c release --static-swift-stdlib -Xswiftc -Xfrontend -Xswiftc -function-sections -Xcxx -ffunction-sections -Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs -Xlinker --no-export-dynamic)
release_flags=("${unordered_flags[@]}" -Xlinker "--symbol-ordering-file=$PWD/Scripts/handoffd.order" -Xlinker --no-warn-symbol-ordering
  -Xlinker -T -Xlinker "$PWD/Scripts/handoffd-hot.ld")
