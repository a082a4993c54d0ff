#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The floors above libsmcr (common/, blockdev/, server/, client/) use only
# its public header, smcr/include/smcr.h: their Makefile.am's -I reach
# smcr/include, not smcr/, and none includes one of smcr/'s internal headers
# (they log through common/applog.h and append with common/strbuf.h); the
# floors call down only (common/ includes nothing of blockdev/, server/ or
# client/, blockdev/ nothing of server/ or client/); and
# libsmcr has one JSON string writer, in smcr/ctl.c; smcrd's rooms and the
# client engine's call one way (down the lists of smcrd-engine-int.h,
# smcrd-int.h and nbd-conn-int.h); and the fuzz targets link every source
# of libsmcr.
# smcr-timeout: 60
. "${srcdir:-.}/functions.sh"

top=$abs_top_srcdir
[ -f "$top/smcr/include/smcr.h" ] || fail "no smcr/include/smcr.h"
[ ! -e "$top/smcr/smcr.h" ] || fail "smcr.h is back among smcr/'s internal headers"
# -I onto smcr/ itself (not smcr/include) from a floor above.
bad_i=$(grep -nE -- '-I[[:space:]]*\$\(top_(src|build)dir\)/smcr/?([[:space:]]|$)' \
            "$top"/{common,blockdev,server,client}/Makefile.am) &&
    fail "-I onto smcr/'s internal headers: ${bad_i//$top\//}"
internal=$(cd "$top/smcr" && ls -- *.h)
[ -n "$internal" ] || fail "no internal headers found in $top/smcr"
# One grep over every file (a grep per file and header took over 60 s on a
# loaded machine); then drop a hit whose header sits beside the file (the
# file's own).
files=()
while IFS= read -r -d '' f; do files+=("$f"); done < <(
    find "$top/common" "$top/blockdev" "$top/server" "$top/client" \
        -type f \( -name '*.c' -o -name '*.h' \) -print0)
n=${#files[@]}
alt=$(sed 's/\./\\./g' <<<"$internal" | paste -sd'|')
bad=()
while IFS=: read -r f inc; do
    h=$(sed -E 's/.*"(\.\.\/smcr\/)?([^"]+)".*/\2/' <<<"$inc")
    [ -f "$(dirname "$f")/$h" ] && continue
    bad+=("${f#"$top"/} includes smcr/$h")
done < <(grep -HE "^#[[:space:]]*include[[:space:]]+\"(\\.\\./smcr/)?($alt)\"" "${files[@]}")
[ "$n" -ge 20 ] || fail "found only $n source files above smcr/"
[ ${#bad[@]} = 0 ] || fail "$(printf '%s; ' "${bad[@]}")"

# The floors call down only: common/ (below blockdev/) includes no header
# of blockdev/, server/ or client/, nor has a -I onto them; blockdev/ (below
# the programs) none of server/'s or client/'s.
# down_only DIR UPPER...: DIR's files include no header of an UPPER folder
# (one beside the file, its own, is no hit).
down_only() {
    local low=$1 up hdrs alt f inc h; shift
    grep -nE -- "-I[[:space:]]*\\\$\\((top_(src|build)dir)\\)/($(IFS='|'; echo "$*"))([/[:space:]]|\$)" \
        "$top/$low/Makefile.am" >"$d/up" && fail "$low/Makefile.am: -I onto a floor above: $(head -n 1 "$d/up")"
    for up in "$@"; do
        hdrs=$(cd "$top/$up" && ls -- *.h 2>/dev/null)
        [ -n "$hdrs" ] || continue
        alt=$(sed 's/\./\\./g' <<<"$hdrs" | paste -sd'|')
        while IFS=: read -r f inc; do
            h=$(sed -E 's/.*"(\.\.\/[a-z]+\/)?([^"]+)".*/\2/' <<<"$inc")
            [ -f "$(dirname "$f")/$h" ] && continue
            fail "${f#"$top"/} includes $up/$h (a floor above $low/)"
        done < <(grep -HE "^#[[:space:]]*include[[:space:]]+\"(\\.\\./$up/)?($alt)\"" \
                     "$top/$low"/*.[ch])
    done
}
d=$(scratch_dir)
down_only common blockdev server client
down_only blockdev server client

# One JSON string escaper in libsmcr, none above it (json-c writes theirs).
esc=$(grep -rlE '\\\\u%04x' "$top/smcr" "$top/common" "$top/blockdev" "$top/server" \
          "$top/client" --include='*.[ch]' | sed "s|^$top/||" | sort)
[ "$esc" = "smcr/ctl.c" ] || fail "JSON escapers in: ${esc:-none} (want smcr/ctl.c only)"
# The rooms call one way: no file calls a function that its private
# header lists under a file above it (smcrd-engine-int.h, smcrd-int.h,
# client/nbd-conn-int.h).
# one_way DIR HEADER FILE...: the files from the top down.
one_way() {
    local dir=$top/$1 hdr=$top/$1/$2 i j f names; shift 2
    local files=("$@")
    for (( i=1; i<${#files[@]}; i++ )); do
        names=()
        for (( j=0; j<i; j++ )); do
            names+=($(awk -v f="${files[j]}" '
                index($0, "/* " f) == 1 && substr($0, length(f) + 4, 1) ~ /[: ]/ { on = 1; next }
                /^$/ { on = 0 }
                on && match($0, /[a-z_0-9]+\(/) { print substr($0, RSTART, RLENGTH - 1) }' "$hdr"))
        done
        [ ${#names[@]} = 0 ] && continue
        f=$dir/${files[i]}
        if grep -nwE "($(IFS='|'; echo "${names[*]}"))" "$f" | grep -vE '^[0-9]+:\s*(/\*|\*)' >"$d/up"; then
            fail "${files[i]} calls up: $(head -n 3 "$d/up")"
        fi
    done
}
one_way server smcrd-engine-int.h smcrd-engine.c smcrd-engine-rx.c smcrd-engine-tx.c \
    smcrd-engine-req.c smcrd-engine-conn.c
one_way server smcrd-int.h smcrd.c smcrd-listen.c smcrd-handshake.c smcrd-daemon.c
one_way client nbd-conn-int.h nbd-conn.c nbd-conn-status.c nbd-conn-reconnect.c \
    nbd-conn-tx.c nbd-conn-rx.c nbd-conn-core.c

# The fuzz targets link libsmcr's sources by name (tests/fuzz/Makefile.am):
# a file added to the library and not to that list breaks their link.
lib_c=$(sed -n '/^libsmcr_internal_la_SOURCES/,/^[^[:space:]]/p' "$top/smcr/Makefile.am" |
        grep -oE '[A-Za-z0-9_]+\.c')
[ -n "$lib_c" ] || fail "no libsmcr sources found in smcr/Makefile.am"
for c in $lib_c; do
    grep -q "(top_srcdir)/smcr/$c" "$top/tests/fuzz/Makefile.am" ||
        fail "smcr/$c is in libsmcr but not in tests/fuzz/Makefile.am's FUZZ_LIB_SRCS"
done

echo "PASS: the floors above smcr/ get -I onto smcr/include only; $n source files above smcr/ include none of its $(wc -w <<<"$internal") internal headers; common/ and blockdev/ include nothing from the floors above them; one JSON escaper (smcr/ctl.c); smcrd's and the client engine's rooms call one way; the fuzz targets link all $(wc -w <<<"$lib_c") of libsmcr's sources"
