#!/usr/bin/env python3
"""Fails (exit 1) when ctest's JUnit report shows a test that did not run,
unless its output says the kernel lacks a feature ("kernel lacks ...", the
one skip tests/support/skip_policy.h allows as root). Used by scripts/test.sh.

  check_skips.py CTEST_JUNIT_XML
"""
import sys
import xml.etree.ElementTree as ET

ALLOWED = "kernel lacks "


def main():
    path = sys.argv[1]
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"check_skips: cannot read {path}: {e}", file=sys.stderr)
        return 1
    bad, allowed, total = [], [], 0
    for case in root.iter("testcase"):
        total += 1
        skipped = case.find("skipped") is not None or case.get("status") in ("notrun", "disabled")
        if not skipped:
            continue
        text = " ".join(filter(None, [(e.text or "") for e in case.iter()] +
                                     [e.get("message", "") for e in case.iter()]))
        (allowed if ALLOWED in text else bad).append(case.get("name"))
    for name in allowed:
        print(f"check_skips: skipped (kernel feature absent): {name}")
    if total == 0:
        print("check_skips: the report lists no tests", file=sys.stderr)
        return 1
    if bad:
        print(f"check_skips: {len(bad)} of {total} tests were skipped without a kernel reason:", file=sys.stderr)
        for name in bad:
            print(f"  {name}", file=sys.stderr)
        return 1
    print(f"check_skips: {total} tests, none skipped without reason")
    return 0


if __name__ == "__main__":
    sys.exit(main())
