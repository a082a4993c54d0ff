#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The manual: every public function of smcr.h has a page name (a link to
# libsmcr(3), man/Makefile.am's LIBSMCR_FUNCS) and is in libsmcr(3)'s
# synopsis; every page renders without warnings; every page a page refers
# to exists.
# smcr-timeout: 60
. "${srcdir:-.}/functions.sh"
requires man --version

hdr=$abs_top_srcdir/smcr/smcr.h
mandir=$abs_top_srcdir/man
d=$(scratch_dir)

sed -E -n 's/^[A-Za-z].*[ *](smcr_[a-z_]+)\(.*/\1/p' "$hdr" | sort -u >"$d/header"
[ "$(wc -l <"$d/header")" -ge 30 ] || fail "found only $(wc -l <"$d/header") functions in smcr.h"
sed -n '/^LIBSMCR_FUNCS/,/^[^\t]/p' "$mandir/Makefile.am" | tr -s ' \t\\' '\n' |
    grep '^smcr_' | sort -u >"$d/links"
diff -u "$d/header" "$d/links" >"$d/diff" ||
    { cat "$d/diff"; fail "man/Makefile.am's LIBSMCR_FUNCS and smcr.h differ (- header, + list)"; }
while read -r f; do
    grep -q "^\.BI \"[^\"]*\b$f(" "$mandir/libsmcr.3" || fail "$f is not in libsmcr(3)'s synopsis"
done <"$d/header"

n=0
for page in "$mandir"/*.[0-9]; do
    out=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l "$page" 2>&1 >/dev/null)
    [ -z "$out" ] || fail "$(basename "$page"): $out"
    # Every ".BR name (N)" reference of ours resolves to a page here.
    for ref in $(grep -oE '^\.BR (smcr[a-z_-]*|libsmcr|nbdkit-smcr-plugin|smcrd|smcrctl) \([0-9]' "$page" |
                 sed -E 's/^\.BR ([^ ]+) \(([0-9])/\1.\2/' | sed 's/\\-/-/g'); do
        name=${ref%.*}; sec=${ref##*.}
        [ -f "$mandir/$ref" ] || grep -qw "$name" "$d/header" ||
            fail "$(basename "$page") refers to $name($sec), which has no page"
    done
    n=$((n + 1))
done
echo "PASS: $(wc -l <"$d/header") functions of smcr.h have pages; $n pages render cleanly"
