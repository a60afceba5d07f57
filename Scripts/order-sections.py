#!/usr/bin/env python3
"""Leaves out of handoffd's symbol order the functions that cannot be placed alone.

lld's --symbol-ordering-file moves input sections, not functions. A function compiled into a
section of its own (`-function-sections`, which the release build asks of every module it
compiles) moves alone; one that shares a large section (parts of the Swift runtime and of
Foundation, which come prebuilt) drags the whole section with it: an idle function of the
standard library in the list put 1.6 MB of it at the head of the hot code. So the functions
that lld took from a section larger than LIMIT are dropped from the list; the rest keep their
order. lld orders by name, local symbols too: a name counts as shared when the section lld took
the function from is large, or when any file it linked defines the name in a large section
(the standard library has local copies of specializations that a module also makes). Which
files lld linked, and from which section it took each function, come from its map of a link
without the order (an archive's members count one by one: those it did not link do not).

The objects are checked too: a Swift or C++ object with a function outside a section of its
own was built without the flags, and the list made from it would be wrong (issue 15).

A large section that the linker script (--script, Scripts/handoffd-hot.ld) places at the head
of the code itself (`*libswiftCore.a:Swift.o(.text)`) drags nothing: names defined there count
only by the section lld took the function from.

Usage: order-sections.py [--script LINKER_SCRIPT] ORDER_FILE LINK_MAP [OBJECT_OR_ARCHIVE...]
(rewrites ORDER_FILE)
"""
import fnmatch
import os
import re
import subprocess
import sys

LIMIT = 64 * 1024


def normalized(file):
    """`file` (`path` or `archive(member)`) with its path made plain (no `..`)."""
    path, member = (file.split("(", 1) + [""])[:2] if file.endswith(")") else (file, "")
    return os.path.normpath(path) + (f"({member}" if member else "")


def linked_sections(link_map):
    """From an lld map (`-Map`): the size of the input section lld took each function from, by
    the function's name, and the files it took sections from (`path`, or `archive(member)`).
    Its lines are `VMA LMA Size Align` then an output section, an input section
    (`file:(section)`, indented 8 more) or a symbol (16 more)."""
    sizes, files = {}, set()
    column, size = None, None
    for line in open(link_map, errors="replace"):
        match = re.match(r"^\s*[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+ (\s*)(\S.*)$", line.rstrip("\n"))
        if not match:
            continue
        indent, rest = len(match.group(2)), match.group(3)
        if column is None or indent < column:
            column = indent  # an output section: the first, or one at the leftmost column seen
            size = None
        elif indent == column + 8 and ":(" in rest:
            size = int(match.group(1), 16)
            files.add(normalized(rest[: rest.rindex(":(")]))
        elif indent == column + 16 and size is not None:
            sizes.setdefault(rest, size)
    return sizes, files


def script_members(script):
    """The archive members whose sections the linker script places itself (`*lib.a:member(...)`),
    as `lib.a(member)` patterns: their large sections are at the head already."""
    if not script:
        return []
    text = re.sub(r"/\*.*?\*/", "", open(script).read(), flags=re.S)
    return [f"{archive}({member})" for archive, member in re.findall(r"(\S+\.a):(\S+?)\(", text)]


def functions_by_file(paths):
    """For each file in `paths` (objects, and archives' members one by one, as
    `archive(member)`): its sections' sizes by index, the indexes of its plain `.text`
    sections, and its functions as (name, section index). One `readelf` a path."""
    for path in paths:
        text = subprocess.run(["readelf", "-SsW", path], capture_output=True, text=True, errors="replace").stdout
        current, sizes, plain, functions = normalized(path), {}, set(), []
        for line in text.splitlines():
            if line.startswith("File: "):
                if functions or sizes:
                    yield current, sizes, plain, functions
                current, sizes, plain, functions = normalized(line[len("File: "):].strip()), {}, set(), []
                continue
            stripped = line.strip()
            if stripped.startswith("[") and "]" in stripped:
                # "[Nr] Name Type Address Off Size ...": the section's index, name and size.
                index, rest = stripped[1:].split("]", 1)
                fields = rest.split()
                if index.strip().isdigit() and len(fields) >= 5:
                    try:
                        sizes[int(index)] = int(fields[4], 16)
                    except ValueError:
                        pass
                    if fields[0] == ".text":
                        plain.add(int(index))
                continue
            fields = stripped.split()
            # "Num: Value Size Type Bind Vis Ndx Name": a function and the section it is in.
            if len(fields) >= 8 and fields[0].endswith(":") and fields[3] == "FUNC" and fields[6].isdigit():
                functions.append((fields[7], int(fields[6])))
        yield current, sizes, plain, functions


def shared_and_stale(paths, linked, placed=()):
    """The names of the functions that a file lld linked (`linked`) defines in a section larger
    than LIMIT, unless the linker script places that file's sections (`placed`): lld orders by
    name the local symbols of every file it links too, so such a name drags that section along
    even where the function the program calls is another file's copy. And the Swift and C++
    objects with a function in the plain `.text`, as one built without the flags has."""
    names, stale = set(), []
    for file, sizes, plain, functions in functions_by_file(paths):
        if file.endswith((".swift.o", ".cc.o", ".cpp.o")) and any(section in plain for _, section in functions):
            stale.append(file)
        if file not in linked or any(fnmatch.fnmatch(file, pattern) for pattern in placed):
            continue
        names.update(name for name, section in functions if sizes.get(section, 0) > LIMIT)
    return names, stale


def main():
    arguments = sys.argv[1:]
    script = None
    if len(arguments) >= 2 and arguments[0] == "--script":
        script, arguments = arguments[1], arguments[2:]
    order, link_map, objects = arguments[0], arguments[1], arguments[2:]
    sizes, linked = linked_sections(link_map)
    if not sizes:
        sys.exit(f"order-sections.py: {link_map} names no function in an input section: is it lld's map (-Map)?")
    shared, stale = shared_and_stale(objects, linked, script_members(script))
    if stale:
        # Built before the flags asked for a section per function: the Swift compiler skips
        # making an object again when its code is unchanged, whatever the flags.
        sys.exit(
            f"order-sections.py: {len(stale)} objects have functions outside sections of their own, "
            f"as one built without -function-sections would (the first: {stale[0]}); "
            "delete the release build folder (.build/<triple>/release) and build again")

    def placeable(name):
        return name not in shared and sizes.get(name, 0) <= LIMIT

    lines = open(order).read().splitlines(keepends=True)
    kept = [line for line in lines if line.startswith("#") or placeable(line.strip())]
    with open(order, "w") as out:
        out.writelines(kept)
    print(f"{order}: {len(lines) - len(kept)} functions left out (in sections over {LIMIT // 1024} KB)", file=sys.stderr)


if __name__ == "__main__":
    main()
