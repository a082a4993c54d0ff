#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The whole test suite, from a fresh Debian 12 machine:
#   1. install dependencies, 2. build plain and with ASan+UBSan, 3. "make
#   check" of the unit and host integration tests in both trees side by
#   side, 4. the rxe VM lane, 5. make distcheck and the Debian packages,
#   6. unit tests under valgrind.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash scripts/install-deps.sh

step() { printf '\n=== %s (at %d s) ===\n' "$*" "$SECONDS"; }
show_logs() {
    # Print the log of every test that did not pass, so CI output says why.
    local dir=$1 f
    for f in $(find "$dir/tests" -name '*.log' ! -name test-suite.log 2>/dev/null); do
        if grep -qE '^:test-result: (FAIL|ERROR|XPASS)' "${f%.log}.trs" 2>/dev/null; then
            echo "----- $f -----"; tail -n 80 "$f"
        fi
    done
}

summary() {
    # What each test verified: CUnit totals, verified byte counts, skips.
    local dir=$1 f
    echo "--- what the tests verified ($dir) ---"
    for f in $(find "$dir/tests" -name '*.log' ! -name test-suite.log | sort); do
        # A log with nothing to show is fine (grep's 1 must not end us).
        { grep -hE '^[0-9]+ tests run|verified|^SKIP|agree|^bench' "$f" 2>/dev/null || true; } |
            sed "s|^|$(basename "${f%.log}"): |"
    done
    # the slowest tests first (run-test's last line in every log)
    echo "--- durations ($dir) ---"
    find "$dir/tests" -name '*.log' ! -name test-suite.log -exec \
        sed -n 's|^run-test: \(.*\) took \([0-9]*\) s.*|\2 s \1|p' {} + |
        sed 's| [^ ]*tests/| |; s| \./| |' | sort -rn | head -n 25
}

# make check builds the test programs (and fuzz targets) one at a time:
# build them first on every core, then run the tests as before.
prebuild() { make -C "$1" -j"$(nproc)" check TESTS= FUZZ_CHECK=no; }

step "build (plain, and ASan+UBSan in build-san)"
bash scripts/build.sh build
prebuild build
bash scripts/build.sh build-san --enable-sanitizers
prebuild build-san
# The unit and host tests run SMCR_CHECK_JOBS (default 2) at a time in each
# tree, the plain and the ASan+UBSan tree side by side: most of their time
# is spent waiting on timeouts, and every one of them passes two at a time
# on a host at load 10-12.  The rxe VM lane runs after them, one test at a
# time (its two guests need both cores).
jobs=${SMCR_CHECK_JOBS:-2}
step "make check: unit and host integration tests, $jobs at a time, plain and ASan+UBSan side by side"
make -C build -j"$jobs" check VM_TESTS= >build/host-check.log 2>&1 & plain=$!
# (FUZZ_CHECK=no: the fuzz targets are ASan+UBSan builds already, replayed
# in the plain tree)
make -C build-san -j"$jobs" check VM_TESTS= FUZZ_CHECK=no >build-san/host-check.log 2>&1 & san=$!
# The lane's kernel modules (kmod-build.sh) built meanwhile, niced, in a
# process group of their own: what is not built when the host tests end is
# stopped there (kmod-build.sh keeps only whole modules) and built by the
# lane test that needs it, as before, so the lane never waits on it.
setsid nice -n 10 bash tests/vm/kmod-prebuild.sh "$top/build" >build/kmod-prebuild.log 2>&1 & kmods=$!
rc_plain=0; wait "$plain" || rc_plain=$?
rc_san=0; wait "$san" || rc_san=$?
if kill -0 "$kmods" 2>/dev/null; then
    echo "kmod-prebuild: stopped at the end of the host tests (at $SECONDS s)" >>build/kmod-prebuild.log
    kill -TERM -- "-$kmods" 2>/dev/null || true
fi
wait "$kmods" || true
cat build/kmod-prebuild.log
tail -n 40 build/host-check.log; tail -n 40 build-san/host-check.log
[ "$rc_plain" = 0 ] || { show_logs build; echo "check.sh: the plain host tests failed" >&2; exit 1; }
[ "$rc_san" = 0 ] || { show_logs build-san; echo "check.sh: the ASan+UBSan host tests failed" >&2; exit 1; }
echo "plain and ASan+UBSan host tests passed (at $SECONDS s)"
# SMCR_VM_612 (default 1 here: every kernel-peer test again with both
# guests on Linux 6.12, about 5 minutes, and smcr-attach-ublk.sh, which
# needs 6.12; core: kernel-v2-6.12.sh and smcr-attach-ublk.sh only; ublk:
# smcr-attach-ublk.sh only).  kernel-v2-6.12.sh runs parts
# SMCR_KV2_612_PARTS, "ab e" by default: data both ways in both roles and
# the aborts; its failover parts (c) and (d) take 5-10 minutes more on a
# loaded host (tests/vm/README.md, "Two kernels").
export SMCR_VM_612=${SMCR_VM_612:-1}
export SMCR_KV2_612_PARTS=${SMCR_KV2_612_PARTS:-ab e}
step "make check: the rxe VM lane (6.1, then SMCR_VM_612=$SMCR_VM_612 on 6.12, kernel-v2 parts '$SMCR_KV2_612_PARTS')"
if ! make -C build check UNIT_TESTS= CHECK_SHELL_TESTS= FUZZ_CHECK=no; then
    show_logs build; exit 1
fi
summary build

# The tarball: it builds, installs and passes the unit tests and the host
# tests of what it installs and ships (the others ran above; FUZZ_CHECK=no:
# the fuzz replay too).
step "make distcheck (the tarball builds, installs and passes the unit tests and the install/man/export tests)"
if ! make -C build distcheck VM_TESTS= FUZZ_CHECK=no \
        CHECK_SHELL_TESTS='test-man.sh test-libsmcr-install.sh test-spdx.sh test-smcrd-info.sh test-smcrd-files.sh'; then
    show_logs build; exit 1
fi

step "the Debian packages: dpkg-buildpackage, the .debs unpacked and checked (tests/test-deb.sh)"
if ! make -C build check TESTS=test-deb.sh SMCR_DEB_TEST=1 FUZZ_CHECK=no; then show_logs build; exit 1; fi

summary build-san

step "valgrind: unit tests"
# test-smcrd drives io_uring (smcrd's engine): memcheck cannot see the
# kernel filling its read buffers (false "uninitialised" reports) and crawls
# through it; it runs under ASan+UBSan above instead.
if ! make -C build check-valgrind SHELL_TESTS= FUZZ_CHECK=no \
        UNIT_TESTS='unit/test-smcr unit/test-wire unit/test-client unit/test-blockdev'; then
    show_logs build; exit 1
fi

step "all checks passed"
