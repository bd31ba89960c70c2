#!/usr/bin/env python3
"""Checks that the examples in docs/*.md are executable.

  scripts/check_docs.py [BUILD_DIR]      (default: build)

1. Every fenced block whose info string is exactly `json policy` is written to a
   temporary file and checked with `BUILD_DIR/tools/znctl/znctl policy check FILE`
   (offline: it parses and compiles the policy as zerod would, without zerod).
   A rejection fails the run.
2. Every `znctl [OPTIONS] OBJECT VERB` in a ```sh (or bash, shell, console) block,
   and in an inline code span that starts with `znctl `, must name an object and,
   for an object with several verbs, a verb that `znctl --help` lists. An object
   with one verb may leave it out (znctl runs that verb), so only the object is
   checked there. `create|update` names two verbs, each checked. Placeholders
   (OBJECT, VERB, <...>, [...]) are not checked.

Each failure is printed as `docs/FILE.md:LINE: what`. Exit 0: all good; 1: a
failure; 2: cannot run (no znctl binary, unreadable help).
"""
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FENCE = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")
SHELL_INFOS = {"sh", "bash", "shell", "console"}
# znctl's global options (tools/znctl/main.cpp): flags, and options taking a value.
GLOBAL_FLAGS = {"-j", "--json", "-p", "--pretty", "-h", "--help"}
GLOBAL_VALUES = {"--socket", "--state-dir", "--pin-root"}
PLACEHOLDER = re.compile(r"[A-Z][A-Z0-9_]*|[\[<].*")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")


def find_znctl(build_dir):
    for base in (build_dir, os.path.join(ROOT, build_dir)):
        path = os.path.join(base, "tools", "znctl", "znctl")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.abspath(path)
    return None


def usage_index(znctl):
    """object -> list of usage token lists (after the object), from `znctl --help`."""
    out = subprocess.run([znctl, "--help"], capture_output=True, text=True, timeout=30)
    index = {}
    for line in out.stdout.splitlines():
        if not line.startswith("  znctl "):
            continue
        tokens = line.split()[1:]
        index.setdefault(tokens[0], []).append(tokens[1:])
    return index


def markdown_parts(path):
    """Yields ("block", info, first_line, [(line_no, text)]) for each fenced block and
    ("text", None, line_no, text) for each line outside them."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            yield ("text", None, i + 1, lines[i])
            i += 1
            continue
        fence, info = m.group(1), m.group(2).strip()
        start = i + 1
        body = []
        i += 1
        while i < len(lines):
            close = FENCE.match(lines[i])
            if close and close.group(1)[0] == fence[0] and len(close.group(1)) >= len(fence) \
                    and not close.group(2).strip():
                break
            body.append((i + 1, lines[i]))
            i += 1
        i += 1  # past the closing fence (or the end)
        yield ("block", info, start, body)


def check_example(command, text, tmpdir, name):
    """Writes an example block to a file and runs command + [file] on it: (accepted, why not)."""
    path = os.path.join(tmpdir, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    r = subprocess.run(command + [path], capture_output=True, text=True, timeout=30)
    return r.returncode == 0, (r.stderr or r.stdout).strip()


def check_mention(tokens, index):
    """tokens: what follows `znctl`. None if fine, else what is wrong."""
    i = 0
    while i < len(tokens) and tokens[i].startswith("-"):
        if tokens[i] in GLOBAL_FLAGS:
            i += 1
        elif tokens[i] in GLOBAL_VALUES:
            i += 2
        else:
            return "unknown option '%s'" % tokens[i]
    if i >= len(tokens):
        return None  # `znctl`, `znctl --help`
    obj = tokens[i]
    if obj == "help" or PLACEHOLDER.fullmatch(obj):
        return None
    if obj not in index:
        return "unknown object '%s' (znctl --help lists %s)" % (obj, ", ".join(sorted(index)))
    usages = index[obj]
    if len(usages) == 1:
        return None  # one verb: it may be left out, so any argument may follow
    verbs = {u[0] for u in usages if u}
    if i + 1 >= len(tokens):
        return None  # `znctl OBJECT` prints the object's usage
    verb = tokens[i + 1]
    if verb == "help" or PLACEHOLDER.fullmatch(verb):
        return None
    # `session create|update ID`: each alternative must be a verb.
    unknown = [v for v in verb.split("|") if v not in verbs]
    if not unknown:
        return None
    return "unknown verb '%s %s' (znctl --help lists %s)" % (obj, unknown[0], ", ".join(sorted(verbs)))


def znctl_mentions(tokens):
    """The words of each `znctl` command, up to the shell's next operator."""
    # A backquote opens or closes a command substitution: an operator of its own.
    tokens = [p for t in tokens for p in re.split(r"(`)", t) if p]
    for k, word in enumerate(tokens):
        if word.rsplit("=", 1)[-1] == "znctl" or word.endswith("/znctl"):
            rest = []
            for t in tokens[k + 1:]:
                if all(c in "();<>|&`" for c in t):
                    break
                rest.append(t)
            yield rest


def split_shell(line):
    """Words and operators ('|', '&&', '$(' ... ')'), comments dropped."""
    try:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        return list(lexer)
    except ValueError:  # an unbalanced quote (e.g. a heredoc's text)
        return line.split()


def shell_lines(body):
    """Joins backslash continuations: [(first_line_no, text)]."""
    out, pending, first = [], "", None
    for no, text in body:
        if first is None:
            first = no
        if text.endswith("\\"):
            pending += text[:-1] + " "
            continue
        out.append((first, pending + text))
        pending, first = "", None
    if pending:
        out.append((first, pending))
    return out


def main():
    build_dir = sys.argv[1] if len(sys.argv) > 1 else "build"
    znctl = find_znctl(build_dir)
    if not znctl:
        print("check_docs: no executable %s/tools/znctl/znctl" % build_dir, file=sys.stderr)
        return 2
    index = usage_index(znctl)
    if not index:
        print("check_docs: `%s --help` lists no usage lines" % znctl, file=sys.stderr)
        return 2
    docs = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    zerod = os.path.join(build_dir, "tools", "zerod", "zerod")
    if not os.access(zerod, os.X_OK):
        print("check_docs: no executable %s" % zerod, file=sys.stderr)
        return 2
    failures, policies, mentions, configs = [], 0, 0, 0
    with tempfile.TemporaryDirectory(prefix="zn-check-docs.") as tmpdir:
        for doc in docs:
            rel = os.path.relpath(doc, ROOT)
            for kind, info, line, content in markdown_parts(doc):
                if kind == "block" and info == "json zerod":
                    configs += 1
                    ok, why = check_example([zerod, "--check-config", "--config"], "\n".join(t for _, t in content) + "\n",
                                            tmpdir, "zerod-%d.json" % configs)
                    if not ok:
                        failures.append("%s:%d: zerod config rejected: %s" % (rel, line, why))
                elif kind == "block" and info == "json policy":
                    policies += 1
                    ok, why = check_example([znctl, "policy", "check"], "\n".join(t for _, t in content) + "\n", tmpdir,
                                            "policy-%d.json" % policies)
                    if not ok:
                        failures.append("%s:%d: policy rejected: %s" % (rel, line, why))
                elif kind == "block" and info.split()[:1] and info.split()[0] in SHELL_INFOS:
                    for no, text in shell_lines(content):
                        for rest in znctl_mentions(split_shell(text)):
                            mentions += 1
                            why = check_mention(rest, index)
                            if why:
                                failures.append("%s:%d: %s" % (rel, no, why))
                elif kind == "text":
                    for m in INLINE_CODE.finditer(content):
                        code = m.group(2).strip().replace("\\|", "|")
                        if not code.startswith("znctl "):
                            continue
                        mentions += 1
                        why = check_mention(code.split()[1:], index)
                        if why:
                            failures.append("%s:%d: %s" % (rel, line, why))
    for f in failures:
        print(f, file=sys.stderr)
    print("check_docs: %d policy block(s), %d zerod config(s), %d znctl mention(s) in %d file(s): %s"
          % (policies, configs, mentions, len(docs), "%d failure(s)" % len(failures) if failures else "ok"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
