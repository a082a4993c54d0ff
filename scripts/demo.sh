#!/bin/bash
# The main job, from a fresh Debian 12 machine: installs the dependencies,
# builds, and runs it.  For now the job is the rxe smoke through the VM lane:
# two VMs (Debian's kernel under qemu, Soft-RoCE on two links) move 1 MiB
# with RDMA WRITE WITH IMM plus a SEND over each link, and one VM writes and
# reads back a pattern through the kernel's nbd-client; it prints what was
# verified.  Needs root (or sudo for the packages; the VMs need root).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

step() { printf '\n=== %s ===\n' "$*"; }

step "dependencies"
bash scripts/install-deps.sh
step "build"
bash scripts/build.sh build

tests='vm/smoke-verbs.sh vm/smoke-nbd.sh'
step "rxe VM lane: $tests"
rc=0
# SUBDIRS=.: only these tests, not the check targets of tests/'s
# subdirectories (e.g. the fuzz seed replay).
make -C build/tests check SUBDIRS=. TESTS="$tests" || rc=$?

step "what the VMs verified"
for t in $tests; do
    log=build/tests/${t%.sh}.log
    echo "--- $t"
    if [ ! -f "$log" ]; then
        echo "(no log: the test did not run)"; rc=1; continue
    fi
    if grep -q '^SKIP' "$log"; then
        grep '^SKIP' "$log"; rc=1
    elif [ "$rc" != 0 ] || ! grep -q '^PASS' "$log"; then
        tail -n 40 "$log"
    else
        grep -E 'verified|^PASS:' "$log"
    fi
done
if [ "$rc" = 0 ]; then
    echo; echo "demo: all checks passed"
else
    echo; echo "demo: FAILED (logs in build/tests/vm/, serial logs in build/tests/vm/*.d/)" >&2
fi
exit "$rc"
