#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The floors above libsmcr (common/, blockdev/, server/, client/) use only
# its public header, smcr.h: none includes one of smcr/'s internal headers
# (they log through common/applog.h and append with common/strbuf.h); and
# libsmcr has one JSON string writer, in smcr/ctl.c.
# smcr-timeout: 60
. "${srcdir:-.}/functions.sh"

top=$abs_top_srcdir
internal=$(cd "$top/smcr" && ls -- *.h | grep -vx 'smcr.h')
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

# One JSON string escaper in libsmcr, none above it (json-c writes theirs).
esc=$(grep -rlE '\\\\u%04x' "$top/smcr" "$top/common" "$top/blockdev" "$top/server" \
          "$top/client" --include='*.[ch]' | sed "s|^$top/||" | sort)
[ "$esc" = "smcr/ctl.c" ] || fail "JSON escapers in: ${esc:-none} (want smcr/ctl.c only)"
echo "PASS: $n source files above smcr/ include none of its $(wc -w <<<"$internal") internal headers; one JSON escaper (smcr/ctl.c)"
