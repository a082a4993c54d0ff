#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Every source file of the tree names its licence in its first lines
# ("SPDX-License-Identifier: BSD-3-Clause", the LICENSE file's).
# smcr-timeout: 60
. "${srcdir:-.}/functions.sh"

top=$abs_top_srcdir
[ -f "$top/LICENSE" ] || fail "no LICENSE in $top"
# One awk over every file (a head and a grep per file took over 60 s on a
# loaded machine): it prints the files that name it in their first lines.
files=()
while IFS= read -r -d '' f; do files+=("$f"); done < <(
    find "$top/common" "$top/smcr" "$top/blockdev" "$top/server" "$top/client" "$top/tests" \
         "$top/scripts" "$top/man" "$top/configure.ac" "$top/Makefile.am" \
         -path "$top/tests/fuzz/corpus" -prune -o -path "$top/tests/vectors" -prune -o \
         -path '*/__pycache__' -prune -o \
         -type f \( -name '*.c' -o -name '*.h' -o -name '*.sh' -o -name '*.py' \
                    -o -name '*.am' -o -name '*.ac' -o -name '*.[138]' \) -print0)
n=${#files[@]}
named=$(awk 'FNR <= 3 && /SPDX-License-Identifier: BSD-3-Clause/ { print FILENAME }' "${files[@]}" |
        sort -u)
mapfile -t bad < <(printf '%s\n' "${files[@]}" | sort -u | comm -23 - <(printf '%s\n' "$named") |
                   sed "s|^$top/||")
[ "$n" -ge 100 ] || fail "found only $n source files under $top"
[ ${#bad[@]} = 0 ] || fail "no SPDX line in: ${bad[*]}"
echo "PASS: $n source files name their licence (BSD-3-Clause)"
