#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job, from a fresh Debian 12 machine: installs the dependencies,
# builds, and runs it in the rxe lane (this machine's kernel has no RDMA):
# two VMs with Debian's kernel under qemu, two Soft-RoCE links between them.
#   1. raw verbs smoke: RC QPs over both links move 1 MiB each, checked;
#   2. the product: smcrd in host B exports a 256 MiB disk image over
#      SMC-R; host A attaches it with `nbdkit smcr` + the kernel's
#      nbd-client (mkfs.ext4, copy a tree, fsck, checksums after remount;
#      fio randrw verify=crc32c) and with smcr-fuse (64 MiB file written
#      and read back, punch-hole); smcrctl shows the link group, its two
#      links and the connections while I/O runs.
# It prints what was verified.  Needs root (packages, VMs).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

step() { printf '\n=== %s ===\n' "$*"; }

# Long steps run with their output in a log (shown only if they fail) and
# the elapsed time every few seconds: in place on a terminal, a line every
# 15 s otherwise.
mkdir -p build
with_progress() {   # LOG CMD...: status of CMD
    local log=$1 start=$SECONDS pid rc=0 n=0 every=5 tty=0
    shift
    [ -t 1 ] && tty=1 || every=15
    "$@" >"$log" 2>&1 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        sleep 1
        n=$((n + 1))
        if [ $((n % every)) = 0 ] && kill -0 "$pid" 2>/dev/null; then
            if [ "$tty" = 1 ]; then
                printf '\r  ... %d s' $((SECONDS - start))
            else
                printf '  ... %d s\n' $((SECONDS - start))
            fi
        fi
    done
    wait "$pid" || rc=$?
    [ "$tty" = 1 ] && printf '\r'
    printf '  %s after %d s (log: %s)\n' "$([ "$rc" = 0 ] && echo done || echo FAILED)" \
        $((SECONDS - start)) "$log"
    return "$rc"
}
quiet() {
    local log=$1
    if ! with_progress "$@"; then
        shift
        tail -n 40 "$log"; echo "demo: '$*' failed (log: $log)" >&2; exit 1
    fi
}
step "dependencies"
quiet build/demo-deps.log bash scripts/install-deps.sh
tail -n 1 build/demo-deps.log
step "build"
quiet build/demo-build.log bash scripts/build.sh build
echo "built into build/"

tests='vm/smoke-verbs.sh vm/client-nbd.sh'
step "rxe VM lane: $tests (about 2 min)"
rc=0
# SUBDIRS=.: only these tests, not the check targets of tests/'s
# subdirectories (e.g. the fuzz seed replay).  make's output goes to the
# log; the summary below is the tests' own.
with_progress build/demo-vm.log make -C build/tests check SUBDIRS=. TESTS="$tests" || rc=$?

step "what the VMs verified"
for t in $tests; do
    log=build/tests/${t%.sh}.log
    echo "--- $t"
    if [ ! -f "$log" ]; then
        echo "(no log: the test did not run; make's output: build/demo-vm.log)"
        tail -n 20 build/demo-vm.log; rc=1; continue
    fi
    if grep -q '^SKIP' "$log"; then
        grep '^SKIP' "$log"; rc=1
    elif [ "$rc" != 0 ] || ! grep -q '^PASS' "$log"; then
        tail -n 40 "$log"
    else
        # Everything the test verified and showed, whole: not the stack's
        # own log lines (libsmcr's, nbdkit's debug lines, ISO-stamped
        # program logs), the VM boot lines or the harness's.
        grep -vE '^(smcr[a-z-]*\[|nbdkit|\[vm |PASS [a-z/]|:test-result|run-test:)' "$log" |
            grep -vE '^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:.]+ [a-z0-9_-]+\[[0-9]+\] ' |
            grep -vE '^\s*$'
    fi
done
if [ "$rc" = 0 ]; then
    echo; echo "demo: all checks passed"
else
    echo; echo "demo: FAILED (logs in build/tests/vm/, serial logs in build/tests/vm/*.d/)" >&2
fi
exit "$rc"
