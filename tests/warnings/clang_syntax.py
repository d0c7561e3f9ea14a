#!/usr/bin/env python3
"""clang_syntax.py [--all] COMPILE_COMMANDS SOURCE_DIR [CLANGXX]

The project's sources compile warning-free under clang too: every
translation unit of COMPILE_COMMANDS (the gcc build's compile_commands.json)
that lives under SOURCE_DIR, outside tests/ and bench/ unless --all (the
test and benchmark units are as many again and cost twice the parse time;
this build's -Werror covers them), is re-parsed with `clang++ -fsyntax-only -Wall
-Wextra -Werror` and the same include paths, defines and ISA flags, in
parallel. Generated files (under the build tree) are left out. Flags only
gcc knows are dropped, as the CMake files drop them for clang. A unit found clean is
remembered (under BUILD/warnings/clang-clean, keyed by its command and the
contents of every file the gcc build recorded it reading, `ninja -t deps`),
so a run re-parses only what changed since. Exit 0 when
every unit is clean, 1 naming each that is not, 77 (skipped) when clang++
is not installed.
"""
import concurrent.futures
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys

# gcc-only flags; -mno-fma would switch AVX-512 off in clang (engine/ops).
GCC_ONLY = {"-mno-fma", "-Wno-maybe-uninitialized"}
CLANG_FLAGS = ["-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-ffp-model=strict",
               "-Wno-unused-command-line-argument"]


def object_of(entry):
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    return args[args.index("-o") + 1] if "-o" in args else None


def clang_command(entry, clangxx):
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    while args and os.path.basename(args[0]) in ("ccache", "sccache"):
        args = args[1:]
    out, skip = [clangxx], False
    for a in args[1:]:
        if skip:
            skip = False
        elif a == "-o":
            skip = True
        elif a != "-c" and a not in GCC_ONLY and a != entry["file"]:
            out.append(a)
    return out + CLANG_FLAGS + [entry["file"]], entry["directory"]


def ninja_deps(build):
    """{object path relative to BUILD: [files it read]}; {} without Ninja."""
    if shutil.which("ninja") is None or not os.path.exists(os.path.join(build, ".ninja_deps")):
        return {}
    r = subprocess.run(["ninja", "-C", build, "-t", "deps"], capture_output=True, text=True)
    deps, current = {}, None
    for line in r.stdout.splitlines():
        if line and not line[0].isspace() and ": #deps" in line:
            current = deps.setdefault(line.split(": #deps")[0], [])
        elif line.strip() and current is not None:
            current.append(line.strip())
    return deps


_file_hashes = {}


def file_hash(path):
    if path not in _file_hashes:
        try:
            with open(path, "rb") as f:
                _file_hashes[path] = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            _file_hashes[path] = "absent"
    return _file_hashes[path]


def unit_key(cmd, cwd, deps):
    """The unit's cache key, or None when its inputs are not known."""
    if not deps:
        return None
    h = hashlib.sha256("\0".join(cmd).encode())
    for d in sorted(deps):
        path = os.path.join(cwd, d)
        h.update(f"\0{path}\0{file_hash(path)}".encode())
    return h.hexdigest()


def check(job):
    cmd, cwd, stamp = job
    if stamp and os.path.exists(stamp):
        return cmd[-1], 0, ""
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if r.returncode == 0 and stamp:
        open(stamp, "w").close()
    return cmd[-1], r.returncode, r.stdout + r.stderr


def main():
    args = sys.argv[1:]
    every = "--all" in args
    args = [a for a in args if a != "--all"]
    if len(args) < 2:
        print(__doc__)
        return 2
    commands, src = args[0], os.path.realpath(args[1])
    clangxx = args[2] if len(args) > 2 else "clang++"
    skipped = () if every else tuple(os.path.join(src, d) + os.sep for d in ("tests", "bench"))
    if shutil.which(clangxx) is None:
        print(f"SKIPPED: {clangxx} is not installed")
        return 77
    build = os.path.realpath(os.path.dirname(commands))
    deps = ninja_deps(build)
    clean_dir = os.path.join(build, "warnings", "clang-clean")
    os.makedirs(clean_dir, exist_ok=True)
    seen, jobs = set(), []
    for entry in json.load(open(commands)):
        f = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
        if not f.startswith(src + os.sep) or f.startswith(build + os.sep) or f.startswith(skipped):
            continue
        cmd, cwd = clang_command(entry, clangxx)
        key = (f, tuple(sorted(a for a in cmd if a.startswith("-D"))))
        if key not in seen:  # a unit built twice alike (one library per variant)
            seen.add(key)
            k = unit_key(cmd, cwd, deps.get(object_of(entry)))
            jobs.append((cmd, cwd, os.path.join(clean_dir, k) if k else None))
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for f, rc, text in pool.map(check, jobs):
            if rc != 0:
                failed += 1
                print(f"FAIL: {os.path.relpath(f, src)}\n{text}")
    print(f"clang++ -Wall -Wextra -Werror: {len(jobs) - failed} of {len(jobs)} units clean")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
