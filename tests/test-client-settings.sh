#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The clients' one settings table (client/nbdc-settings.c nbdc_settings[]):
#  - every row is in the --help of each client that offers it (nbdkit smcr
#    --help as NAME=, smcr-fuse and smcr-attach as --NAME, with the same
#    short letter) and in its man page;
#  - a bad value gets the same one line from all three (exit 2, nbdkit 1);
#  - -t is --tcp in smcr-fuse and smcr-attach; smcr-fuse's old -t S and
#    smcr-attach's old --timeout S still work and say so.
# smcr-timeout: 60
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"
requires nbdkit --version
ATTACH=$abs_top_builddir/client/smcr-attach
[ -x "$abs_top_builddir/client/.libs/smcr-attach" ] && ATTACH=$abs_top_builddir/client/.libs/smcr-attach
mandir=$abs_top_srcdir/man
d=$(scratch_dir)
# nbdkit as start_nbdkit runs it (the ASan runtime first for a sanitized plugin).
# There nbdkit can hang in exit() after the plugin's error (see
# test-client-tls.sh): a timeout counts as its exit 1.
nk=(nbdkit) asan=0
if readelf -d "$PLUGIN" 2>/dev/null | grepq 'NEEDED.*libasan'; then
    nk=(env "LD_PRELOAD=$(gcc -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0 nbdkit)
    asan=1
fi

# NAME ALIAS SHORT IN per row.
sed -n '/^const struct nbdc_setting nbdc_settings/,/^};/p' "$abs_top_srcdir/client/nbdc-settings.c" |
    tr -s '\n\t' '  ' | grep -oE '\[NBDC_S_[A-Z_]+\] = \{[^}]*\}' |
    sed -E 's/.*\{ "([a-z-]+)", (NULL|"([a-z-]+)"), (0|'"'"'(.)'"'"'),.*", +(NBDC_IN_[A-Z_| ]*[A-Z]) \}$/\1;\3;\5;\6/' |
    tr -d ' ' | awk -F';' '{ for (i = 1; i <= 4; i++) if ($i == "") $i = "-"; print $1, $2, $3, $4 }' >"$d/rows"
[ "$(wc -l <"$d/rows")" -ge 12 ] || { cat "$d/rows"; fail "found only $(wc -l <"$d/rows") rows"; }
"${nk[@]}" "$PLUGIN" --help >"$d/plugin.help" 2>&1 || fail "nbdkit smcr --help"
run_prog "$SMCR_FUSE" --help >"$d/fuse.help" || fail "smcr-fuse --help"
run_prog "$ATTACH" --help >"$d/attach.help" || fail "smcr-attach --help"
man_has() { grep -qF -- "$2" "$mandir/$1" || fail "$1 does not name $2"; }
n=0
while read -r name alias short in <&3; do
    [ "$alias" = - ] && alias=
    [ "$short" = - ] && short=
    esc=${name//-/\\-}
    if [[ $in = *ALL* || $in = *PLUGIN* ]]; then
        grepq "^$name=" "$d/plugin.help" || fail "nbdkit smcr --help lacks $name="
        man_has nbdkit-smcr-plugin.1 "$esc="
    fi
    for c in fuse attach; do
        [[ $in = *ALL* || $in = *${c^^}* ]] || continue
        long=$name
        [ "$c" = attach ] && [ "$name" = timeout ] && long=$alias
        grepq -- "--$long\b" "$d/$c.help" || fail "smcr-$c --help lacks --$long"
        [ -z "$short" ] || grepq -- "-$short, --$long\b" "$d/$c.help" ||
            fail "smcr-$c --help: no -$short, --$long"
        page=smcr-fuse.1
        [ "$c" = attach ] && page=smcr-attach.8
        man_has $page "\\-\\-${long//-/\\-}"
    done
    n=$((n + 1))
done 3<"$d/rows"
echo "$n settings in the three --help texts and man pages"

# The same reason from all three.
want="connections: 1 to 16, not '17'"
rc=0; run_prog "$SMCR_FUSE" -C 17 nbd://h/x "$d" 2>"$d/err" || rc=$?
[ "$rc" = 2 ] && grepq "$want" "$d/err" || { cat "$d/err"; fail "smcr-fuse -C 17: exit $rc"; }
rc=0; run_prog "$ATTACH" --connections=17 h x /dev/nbd0 2>"$d/err" || rc=$?
[ "$rc" = 2 ] && grepq "$want" "$d/err" || { cat "$d/err"; fail "smcr-attach --connections=17: exit $rc"; }
rc=0; timeout $((asan ? 20 : 60)) "${nk[@]}" -U - "$PLUGIN" server=h connections=17 --run true \
    2>"$d/err" || rc=$?
[ "$rc" = 124 ] && [ "$asan" = 1 ] && rc=1
[ "$rc" = 1 ] && grepq "$want" "$d/err" || { cat "$d/err"; fail "plugin connections=17: exit $rc"; }
echo "connections 17, refused alike: $want"
rc=0; run_prog "$ATTACH" --rmbe-size=4M h x /dev/nbd0 2>"$d/err" || rc=$?
[ "$rc" = 2 ] && grepq -- "--rmbe-size needs --forward or --ublk" "$d/err" ||
    { cat "$d/err"; fail "smcr-attach --rmbe-size without -F or --ublk: exit $rc"; }
rc=0; run_prog "$SMCR_FUSE" --rmbe-size=1G nbd://h/x "$d" 2>"$d/err" || rc=$?
[ "$rc" = 2 ] && grepq "rmbe-size: 0 or 16K to 512M, not '1G'" "$d/err" ||
    { cat "$d/err"; fail "smcr-fuse --rmbe-size=1G: exit $rc"; }

# -t: --tcp; the old spellings.
rc=0; run_prog "$SMCR_FUSE" -t "nbd+unix:///x?socket=/nonexistent" "$d" 2>"$d/err" || rc=$?
[ "$rc" = 2 ] && grepq -- "--transport: not with a Unix socket" "$d/err" ||
    { cat "$d/err"; fail "smcr-fuse -t is not --tcp (exit $rc)"; }
rc=0; run_prog "$SMCR_FUSE" -t 5 -C 17 nbd://h/x "$d" 2>"$d/err" || rc=$?
grepq -- "-t S is -D S (--timeout S); -t alone is --tcp" "$d/err" && grepq "$want" "$d/err" ||
    { cat "$d/err"; fail "smcr-fuse -t 5: no line on the old spelling"; }
rc=0; run_prog "$ATTACH" --timeout 5 -C 17 h x /dev/nbd0 2>"$d/err" || rc=$?
grepq -- "--timeout S is an old spelling of --driver-timeout S" "$d/err" ||
    { cat "$d/err"; fail "smcr-attach --timeout: no line on the old spelling"; }
rc=0; run_prog "$ATTACH" -t --tls h x /dev/nbd0 2>"$d/err" || rc=$?
[ "$rc" = 2 ] && grepq "TLS needs --forward" "$d/err" || { cat "$d/err"; fail "smcr-attach -t --tls: exit $rc"; }
echo "-t is --tcp in smcr-fuse and smcr-attach; the old -t S and --timeout S still taken"
echo PASS
