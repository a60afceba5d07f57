#!/usr/bin/env python3
"""Leaves out of handoffd's symbol order the functions that cannot be placed alone.

lld's --symbol-ordering-file moves input sections, not functions. A function compiled into a
section of its own (`-function-sections`, which the release build asks of every module it
compiles) moves alone; one that shares a large section (parts of the Swift runtime and of
Foundation, which come prebuilt) drags the whole section with it: an idle function of the
standard library in the list put 1.6 MB of it at the head of the hot code. So the functions
whose section is larger than LIMIT are dropped from the list; the rest keep their order.

Usage: order-sections.py ORDER_FILE OBJECT_OR_ARCHIVE...  (rewrites ORDER_FILE)
"""
import subprocess
import sys

LIMIT = 64 * 1024


def shared_sections(paths):
    """The names of the functions defined in sections larger than LIMIT, in `paths`."""
    names = set()
    for path in paths:
        text = subprocess.run(["readelf", "-SsW", path], capture_output=True, text=True, errors="replace").stdout
        sizes = {}
        for line in text.splitlines():
            if line.startswith("File: "):
                sizes = {}
                continue
            stripped = line.strip()
            if stripped.startswith("[") and "]" in stripped:
                # "[Nr] Name Type Address Off Size ...": the section's index and size.
                index, rest = stripped[1:].split("]", 1)
                fields = rest.split()
                if index.strip().isdigit() and len(fields) >= 5:
                    try:
                        sizes[int(index)] = int(fields[4], 16)
                    except ValueError:
                        pass
                continue
            fields = stripped.split()
            # "Num: Value Size Type Bind Vis Ndx Name": a function and the section it is in.
            if len(fields) >= 8 and fields[0].endswith(":") and fields[3] == "FUNC" and fields[6].isdigit():
                if sizes.get(int(fields[6]), 0) > LIMIT:
                    names.add(fields[7])
    return names


def main():
    order, paths = sys.argv[1], sys.argv[2:]
    shared = shared_sections(paths)
    lines = open(order).read().splitlines(keepends=True)
    kept = [line for line in lines if line.startswith("#") or line.strip() not in shared]
    with open(order, "w") as out:
        out.writelines(kept)
    print(f"{order}: {len(lines) - len(kept)} functions left out (in sections over {LIMIT // 1024} KB)", file=sys.stderr)


if __name__ == "__main__":
    main()
