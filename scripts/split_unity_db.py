#!/usr/bin/env python3
"""Writes a compile_commands.json that names each source file, from one that
names the unity batches (ZN_UNITY_BUILD): clang-tidy looks a file up by its
own name. Each file gets its batch's command with the batch replaced by it
(and without g++'s batch-only -Wno-subobject-linkage, unknown to clang).

usage: scripts/split_unity_db.py BUILD_DIR OUT_DIR
"""
import json
import os
import re
import sys


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    build, out = sys.argv[1], sys.argv[2]
    entries = json.load(open(os.path.join(build, "compile_commands.json")))
    split = []
    for e in entries:
        batch = e["file"]
        if "/Unity/unity_" not in batch:
            split.append(e)
            continue
        with open(batch) as f:
            sources = re.findall(r'^#include "([^"]+)"', f.read(), re.M)
        for src in sources:
            # g++'s batch-only warning switch is unknown to clang-tidy.
            command = e["command"].replace(batch, src).replace(" -Wno-subobject-linkage", "")
            split.append(dict(e, file=src, command=command))
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "compile_commands.json"), "w") as f:
        json.dump(split, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
