#!/usr/bin/env python3
"""cross_qemu_test.py SOURCE_DIR ARM_BUILD_DIR X86_LOCKSTEP SHARED_DIR

Cross-builds lockstep for aarch64, checks its disassembly has no fused
multiply-add, then runs every conformance/extension vector and a synthetic
model under qemu-aarch64 (--isa neon, --isa scalar, --isa neon --threads 3)
and requires the --json output to equal the x86 build's byte for byte and
the vectors' expected values key by key. Exit 77 when the tools are absent.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

src, arm_dir, x86, shared = sys.argv[1:5]

tools = ["aarch64-linux-gnu-g++", "aarch64-linux-gnu-objdump", "qemu-aarch64"]
missing = [t for t in tools if shutil.which(t) is None]
if missing or not os.path.exists("/lib/ld-linux-aarch64.so.1"):
    print("SKIPPED: missing " + ", ".join(missing or ["libc6:arm64"]) +
          " (bash scripts/setup.sh installs the cross toolchain and qemu-user)")
    sys.exit(77)

t0 = time.time()
configure = ["cmake", "-S", src, "-B", arm_dir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
             "-DCMAKE_TOOLCHAIN_FILE=" + os.path.join(src, "cmake/toolchains/aarch64-linux-gnu.cmake"),
             "-DLOCKSTEP_BUILD_TESTS=OFF", "-DLOCKSTEP_BUILD_BENCH=OFF", "-DLOCKSTEP_WERROR=OFF"]
if shutil.which("ccache"):
    configure += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache", "-DCMAKE_C_COMPILER_LAUNCHER=ccache"]
subprocess.run(configure, check=True, stdout=subprocess.DEVNULL)
subprocess.run(["cmake", "--build", arm_dir, "--target", "lockstep", "-j", str(os.cpu_count() or 2)],
               check=True, stdout=subprocess.DEVNULL)
arm = os.path.join(arm_dir, "cli", "lockstep")
print(f"cross-build: {time.time() - t0:.0f} s")

# Fused multiply-add family on AArch64 (scalar, vector, bf16/fp16 widening).
fused = re.compile(r"\s(fn?m(add|sub)|fml[as]l?2?|bfml[as]l[bt]?|bfdot|bfmmla)\s")
dis = subprocess.run(["aarch64-linux-gnu-objdump", "-d", "--no-show-raw-insn", arm],
                     check=True, capture_output=True, text=True).stdout
if "file format elf64-littleaarch64" not in dis:
    print("FAIL: objdump did not read an aarch64 binary"); sys.exit(1)
if not re.search(r"\sfmul\s", dis):  # the pattern must see float instructions at all
    print("FAIL: no fmul in the disassembly; the fused-op scan would see nothing"); sys.exit(1)
hits = [line.strip() for line in dis.splitlines() if fused.search(line)]
if hits:
    print("FAIL: fused multiply-add instructions in the aarch64 binary:")
    print("\n".join(hits[:20])); sys.exit(1)

work = tempfile.mkdtemp()
try:
    syn = os.path.join(work, "syn")
    subprocess.run([x86, "make-model", syn, "--seed", "11", "--hidden", "48", "--layers", "3",
                    "--heads", "6", "--kv-heads", "2", "--inter", "96", "--vocab", "300",
                    "--bias", "--untied"], check=True, stdout=subprocess.DEVNULL)
    cases = [("synthetic", syn, ["--ids", "3,1,4,1,5,9", "--gen", "10", "--window", "4",
                                 "--evict", "1:2@3"], {})]
    for name in ["vectors.json", "extension-vectors.json"]:
        path = os.path.join(shared, "fixtures/conformance", name)
        if not os.path.exists(path):
            print(f"note: {path} is absent; its cases are not run")
            continue
        for c in json.load(open(path))["cases"]:
            cases.append((c["name"], os.path.join(shared, "fixtures/conformance", c["model"]),
                          c["args"], c["expect"]))

    def run(exe, model, args, extra, emulate):
        cmd = ([ "qemu-aarch64"] if emulate else []) + [exe, "run", "--model", model] + args + ["--json"] + extra
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
        if r.returncode != 0:
            return None, r.stderr.strip()
        return r.stdout.strip().splitlines()[-1], ""

    failed = 0
    runs = 0
    unsupported = 0
    t1 = time.time()
    for name, model, args, expect in cases:
        ref, err = run(x86, model, args, ["--isa", "scalar"], False)
        if ref is None and "Unimplemented" in err:
            # A feature this build lacks: both builds must refuse it alike.
            _, arm_err = run(arm, model, args, ["--isa", "neon"], True)
            runs += 1
            if arm_err != err:
                print(f"FAIL {name}: x86 refuses ({err}) but aarch64 says: {arm_err}"); failed += 1
            else:
                unsupported += 1
                print(f"skip {name}: not supported by this build, refused alike: {err[:120]}")
            continue
        if ref is None:
            print(f"FAIL {name}: x86 run failed: {err}"); failed += 1; continue
        for extra in (["--isa", "neon"], ["--isa", "scalar"], ["--isa", "neon", "--threads", "3"]):
            out, err = run(arm, model, args, extra, True)
            runs += 1
            label = f"{name} {' '.join(extra)}"
            if out is None:
                print(f"FAIL {label}: aarch64 run failed: {err}"); failed += 1; continue
            if out != ref:
                print(f"FAIL {label}: aarch64 output differs from x86\n x86: {ref}\n arm: {out}")
                failed += 1; continue
            got = json.loads(out)
            bad = [k for k, v in expect.items() if got.get(k) != v]
            if bad:
                print(f"FAIL {label}: differs from the vector's expected {bad}"); failed += 1; continue
            print(f"ok   {label}")
    print(f"aarch64 under qemu vs x86: {runs - failed - unsupported} of {runs} runs equal, "
          f"{unsupported} case(s) refused alike as unsupported; "
          f"qemu runs {time.time() - t1:.0f} s, total {time.time() - t0:.0f} s")
    sys.exit(1 if failed else 0)
finally:
    shutil.rmtree(work, ignore_errors=True)
