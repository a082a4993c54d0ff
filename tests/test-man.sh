#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The manual: every public function of smcr.h has a page name (a link to
# libsmcr(3), man/Makefile.am's LIBSMCR_FUNCS) and is in libsmcr(3)'s
# synopsis; every page renders without warnings; every page a page refers
# to exists; every smcrd setting is in smcrd(8) and smcrd --help, and
# smcrd.conf(5) has an entry with its default for each global setting and
# names every export key.
# smcr-timeout: 60
. "${srcdir:-.}/functions.sh"
requires man --version

hdr=$abs_top_srcdir/smcr/include/smcr.h
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
    out=$(LC_ALL=C.UTF-8 MANROFFSEQ= MANWIDTH=80 man --warnings -E UTF-8 -l "$page" 2>&1 >/dev/null)
    [ -z "$out" ] || fail "$(basename "$page"): $out"
    # Every ".BR name (N)" reference of ours resolves to a page here.
    for ref in $(grep -oE '^\.BR (smcr[a-z_.-]*|libsmcr|nbdkit-smcr-plugin|smcrd|smcrctl) \([0-9]' "$page" |
                 sed -E 's/^\.BR ([^ ]+) \(([0-9])/\1.\2/' | sed 's/\\-/-/g'); do
        name=${ref%.*}; sec=${ref##*.}
        [ -f "$mandir/$ref" ] || grep -qw "$name" "$d/header" ||
            fail "$(basename "$page") refers to $name($sec), which has no page"
    done
    n=$((n + 1))
done
# smcrd's settings (server/smcrd-conf.c smcrd_settings[]): each is an option
# in smcrd(8)'s OPTIONS and in --help, and a key of its CONFIG FILE list,
# which names no other global key.
conf=$abs_top_srcdir/server/smcrd-conf.c
sed -n '/^const struct cfg_setting smcrd_settings\[\]/,/^};/p' "$conf" |
    sed -E -n 's/^\t(SET|ENUM)\("([a-z-]+)", (NULL|"([a-z-]+)"|[a-z_]+),.*/\2 \4/p' >"$d/settings"
[ "$(wc -l <"$d/settings")" -ge 27 ] || fail "found only $(wc -l <"$d/settings") smcrd settings"
sed -n '/^\.SH OPTIONS/,/^\.SH /p' "$mandir/smcrd.8" >"$d/options"
sed -n '/^\.SH CONFIG FILE/,/^Each export/p' "$mandir/smcrd.8" |
    sed -E -n 's/^\.BR? ([a-z\\-]+).*/\1/p' | sed 's/\\-/-/g' | sort >"$d/keys"
help=$(sed -n '/^static void usage/,/^}/p' "$abs_top_srcdir/server/smcrd.c")
while read -r key opt; do
    opt=${opt:-$key}
    grep -qF -- "\-\-${opt//-/\\-}\fR" "$d/options" || fail "smcrd(8) OPTIONS lacks --$opt"
    grep -qE -- "--$opt([^a-z-]|$)" <<<"$help" || fail "smcrd --help (usage()) lacks --$opt"
done <"$d/settings"
cut -d' ' -f1 "$d/settings" | sort | diff -u - "$d/keys" >"$d/diff" ||
    { cat "$d/diff"; fail "smcrd(8)'s CONFIG FILE keys and smcrd_settings[] differ (+ page only)"; }
# smcrd.conf(5): GLOBAL SETTINGS has one entry (.TP, then .BI "KEY = ")
# per setting and no other, each with a "Default:"; EXPORT SETTINGS names
# every key export_set() takes (aliases too).
page5=$mandir/smcrd.conf.5
sed -n '/^\.SH GLOBAL SETTINGS/,/^\.SH /p' "$page5" >"$d/global5"
awk '/^\.TP/ { getline; if (match($0, /^\.BI "[a-z\\-]+ = "/)) { k = substr($0, 6, RLENGTH - 9); gsub(/\\-/, "-", k); key = k; print key > "/dev/stderr" } next }
     /^\.(TP|PP|SH)/ { key = "" }
     /Default:/ && key != "" { print key; key = "" }' "$d/global5" 2>"$d/keys5" >"$d/defaults5"
sort "$d/keys5" >"$d/keys5.sorted"
cut -d' ' -f1 "$d/settings" | sort | diff -u - "$d/keys5.sorted" >"$d/diff" ||
    { cat "$d/diff"; fail "smcrd.conf(5)'s GLOBAL SETTINGS and smcrd_settings[] differ (+ page only)"; }
sort "$d/defaults5" | diff -u "$d/keys5.sorted" - >"$d/diff" ||
    { cat "$d/diff"; fail "smcrd.conf(5): entries without a 'Default:' (- those)"; }
sed -n '/^\.SH EXPORT SETTINGS/,/^\.SH /p' "$page5" | sed 's/\\-/-/g' >"$d/export5"
sed -n '/^static int export_set(/,/^}/p' "$conf" | grep -oE '!strcmp\(key, "[a-z-]+"\)' |
    sed -E 's/.*"(.*)".*/\1/' >"$d/export_keys"
[ "$(wc -l <"$d/export_keys")" -ge 10 ] || fail "found only $(wc -l <"$d/export_keys") export keys in export_set()"
while read -r key; do
    grep -qE "^\.(B|BR|BI) \"?$key( = \"| |\"|$)" "$d/export5" ||
        fail "smcrd.conf(5)'s EXPORT SETTINGS does not name the export key '$key'"
done <"$d/export_keys"
echo "PASS: $(wc -l <"$d/header") functions of smcr.h have pages; $n pages render cleanly; $(wc -l <"$d/settings") smcrd settings in smcrd(8), --help and smcrd.conf(5) (each with a default), $(wc -l <"$d/export_keys") export keys in smcrd.conf(5)"
