#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs every libFuzzer target over its seed corpus (each input once, a
# regression check), then FUZZ_CHECK_RUNS mutations from there (a tenth
# of that for the slow targets of FUZZ_SLOW: a link group or a socket per
# run).  Any crash, sanitizer report or failed property fails the test.
set -u
: "${srcdir:=.}" "${FUZZ_TARGETS:=fuzz-clc fuzz-llc fuzz-cdc fuzz-tcpopt}"
: "${FUZZ_CHECK_RUNS:=20000}" "${FUZZ_SLOW:=fuzz-lgr-llc fuzz-lgr-cdc fuzz-ctl}"
work=$(mktemp -d "${TMPDIR:-/tmp}/smcrbd-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work
trap 'exit 1' INT TERM
rc=0
for t in $FUZZ_TARGETS; do
    n=${t#fuzz-}
    runs=$FUZZ_CHECK_RUNS
    case " $FUZZ_SLOW " in *" $t "*) runs=$((runs / 10)) ;; esac
    seeds=("$srcdir/corpus/$n"/*)
    echo "=== $t: ${#seeds[@]} seeds, then $runs runs"
    if ! "./$t" -artifact_prefix="$work/" "${seeds[@]}"; then
        echo "FAIL: $t on its seed corpus"; rc=1; continue
    fi
    mkdir -p "$work/$n"
    if ! "./$t" -runs="$runs" -seed=1 -artifact_prefix="$work/" \
            "$work/$n" "$srcdir/corpus/$n"; then
        echo "FAIL: $t while mutating"; rc=1
    fi
done
exit "$rc"
