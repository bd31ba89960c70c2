#!/usr/bin/env python3
"""Fails (exit 1) when a source file includes a header from a folder that is
not below its own in the dependency order (issue 10): capabilities depend
only downward, tools -> broker -> userspace, vmm -> common, and inside each
layer in the order written here. The same order holds for the libraries each
folder's CMakeLists.txt links (zn_capability(zn_<folder> ... PUBLIC/PRIVATE
zn_<lower> ...)): the build then refuses an include of anything not linked.
Run by scripts/test.sh before the build.

  check_includes.py [REPO_ROOT]
"""
import os
import re
import sys

# Each folder of src/ with the folders it may include from (besides itself,
# system headers and the BPF ABI headers in bpf/include). Lower layers first.
USERSPACE = ["userspace/net", "userspace/datapath", "userspace/http", "userspace/h2", "userspace/websocket",
             "userspace/tls", "userspace/dns", "userspace/proxy", "userspace/ingress", "userspace/command"]
VMM = ["vmm/host", "vmm/lab", "vmm/microvm"]
LOWER = ["common"] + USERSPACE + VMM
ALLOWED = {
    "common": [],
    "userspace/net": ["common"],
    "userspace/datapath": ["common", "userspace/net"],
    "userspace/http": [],
    "userspace/h2": ["userspace/http"],
    "userspace/websocket": ["userspace/http"],
    "userspace/tls": ["userspace/net"],
    "userspace/dns": ["common", "userspace/net", "userspace/datapath"],
    "userspace/proxy": ["common", "userspace/net", "userspace/datapath", "userspace/http", "userspace/h2",
                        "userspace/websocket", "userspace/tls"],
    "userspace/ingress": ["common", "userspace/net", "userspace/http", "userspace/proxy"],
    "userspace/command": [],
    "vmm/host": ["common", "userspace/net"],
    "vmm/lab": ["common", "userspace/net", "vmm/host"],
    "vmm/microvm": ["common", "userspace/net", "vmm/host"],
    "broker/secrets": LOWER,
    "broker/policy": LOWER + ["broker/secrets"],
    "broker/resources": LOWER + ["broker/secrets", "broker/policy"],
    "broker/audit": LOWER + ["broker/secrets", "broker/policy"],
    "broker/identity": LOWER + ["broker/secrets"],
    "broker/audit_export": LOWER + ["broker/secrets", "broker/policy", "broker/audit", "broker/identity"],
    "broker/audit_sinks": LOWER + ["broker/secrets", "broker/policy", "broker/audit", "broker/identity",
                                   "broker/audit_export"],
    "broker/session": LOWER + ["broker/secrets", "broker/resources", "broker/policy", "broker/audit",
                               "broker/identity"],
    "broker/exposure": LOWER + ["broker/secrets", "broker/policy", "broker/audit", "broker/session"],
    "broker/commands": LOWER + ["broker/secrets", "broker/policy", "broker/audit", "broker/identity",
                                "broker/session"],
    "broker/vms": LOWER + ["broker/secrets", "broker/resources", "broker/policy", "broker/audit",
                           "broker/identity", "broker/session"],
    "broker/control": LOWER + ["broker/secrets", "broker/resources", "broker/policy", "broker/audit", "broker/audit_export", "broker/audit_sinks",
                               "broker/session", "broker/exposure", "broker/commands", "broker/vms"],
    "broker/daemon": LOWER + ["broker/secrets", "broker/resources", "broker/policy", "broker/audit", "broker/audit_export", "broker/audit_sinks",
                              "broker/identity", "broker/session", "broker/exposure", "broker/commands",
                              "broker/vms", "broker/control"],
}
CAPABILITY = re.compile(r"zn_capability\((\w+)(.*?)\)\s*$", re.S | re.M)
LIBRARY = re.compile(r"\bzn_\w+")
# Libraries that are not capability folders: the BPF ABI header, Asio's flags.
NOT_FOLDERS = {"zn_bpf_abi", "zn_asio"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of_header(include):
    parts = include.split("/")
    if len(parts) == 1:
        return None  # same folder, a BPF ABI header or a generated skeleton
    for depth in (2, 1):
        candidate = "/".join(parts[:depth])
        if candidate in ALLOWED:
            return candidate
    return "?" + include


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    src = os.path.join(root, "src")
    problems, files = [], 0
    for dirpath, _, names in os.walk(src):
        folder = os.path.relpath(dirpath, src)
        # A folder inside a capability's folder (userspace/proxy/filters) is
        # part of that capability: the same library, the same rules.
        parts = folder.split(os.sep)
        for depth in (2, 1):
            if len(parts) > depth and "/".join(parts[:depth]) in ALLOWED:
                folder = "/".join(parts[:depth])
                break
        for name in names:
            if not name.endswith((".h", ".cpp")):
                continue
            files += 1
            path = os.path.join(dirpath, name)
            if folder not in ALLOWED:
                problems.append(f"src/{folder}/{name}: folder not in the dependency order (add it)")
                continue
            with open(path, encoding="utf-8") as f:
                text = f.read()
            for include in INCLUDE.findall(text):
                target = folder_of_header(include)
                if target is None or target == folder or target in ALLOWED[folder]:
                    continue
                problems.append(f"src/{folder}/{name}: includes \"{include}\" ({target} is not below {folder})")
    problems += check_links(src)
    for p in problems:
        print("check_includes: " + p, file=sys.stderr)
    if problems:
        return 1
    print(f"check_includes: {files} files, every include goes downward")
    return 0


def check_links(src):
    """Each capability library links only libraries of folders below it."""
    folder_of_target, declared = {}, {}
    for folder in ALLOWED:
        cmake = os.path.join(src, folder, "CMakeLists.txt")
        if not os.path.exists(cmake):
            continue
        with open(cmake, encoding="utf-8") as f:
            for target, body in CAPABILITY.findall(f.read()):
                folder_of_target[target] = folder
                declared[target] = set(LIBRARY.findall(body)) - NOT_FOLDERS
    problems = [f"src/{folder}: no zn_capability() in its CMakeLists.txt"
                for folder in ALLOWED if folder not in folder_of_target.values()]
    for target, deps in declared.items():
        folder = folder_of_target[target]
        for dep in sorted(deps):
            lower = folder_of_target.get(dep)
            if lower is None:
                problems.append(f"src/{folder}/CMakeLists.txt: links {dep}, not a capability library")
            elif lower != folder and lower not in ALLOWED[folder]:
                problems.append(f"src/{folder}/CMakeLists.txt: links {dep} ({lower} is not below {folder})")
    return problems


if __name__ == "__main__":
    sys.exit(main())
