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

# The install and build output goes to logs, shown only if a step fails.
mkdir -p build
quiet() {
    local log=$1; shift
    if ! "$@" >"$log" 2>&1; then
        tail -n 40 "$log"; echo "demo: '$*' failed (log: $log)" >&2; exit 1
    fi
}
step "dependencies"
quiet build/demo-deps.log bash scripts/install-deps.sh
tail -n 1 build/demo-deps.log
step "build"
quiet build/demo-build.log bash scripts/build.sh build
echo "built into build/ (log: build/demo-build.log)"

tests='vm/smoke-verbs.sh vm/client-nbd.sh'
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
        # Everything the test printed but the stack's own log lines.
        grep -vE '^(smcr[a-z-]*\[|nbdkit|\[vm |PASS [a-z/]|:test-result)' "$log" |
            grep -vE '^\s*$' | tail -n 40
    fi
done
if [ "$rc" = 0 ]; then
    echo; echo "demo: all checks passed"
else
    echo; echo "demo: FAILED (logs in build/tests/vm/, serial logs in build/tests/vm/*.d/)" >&2
fi
exit "$rc"
