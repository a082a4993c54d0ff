#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The bash completions (bash-completion/) as built, sourced into a plain
# bash (no bash-completion), each program's completion function called with
# COMP_WORDS and COMP_CWORD set:
#  - "--" offers every long option of the program's --help, and nothing
#    else;
#  - smcrctl st -> status, stats; smcrctl -j f -> fail-link, fault;
#    smcrctl --dir DIR status sm -> the programs of DIR's sockets;
#    smcrd --log-l -> --log-level; smcr-attach --sta -> --standby;
#  - option values: smcrd --log-level (split at '=' too) -> the four levels,
#    --tls -> off on require, smcr-attach --tls-verify-peer (BOOL) -> false
#    true, --tls= ([=off|on|require]) and --transport (smcr|tcp) likewise;
#    smcrd --config and -c complete file names, smcrd --tls-certificates
#    directory names.
# smcr-timeout: 60
. "${srcdir:-.}/functions.sh"

comp=$abs_top_builddir/bash-completion
SMCRD=$abs_top_builddir/server/smcrd
SMCRCTL=$abs_top_builddir/client/smcrctl
ATTACH=$abs_top_builddir/client/smcr-attach
FUSE=$abs_top_builddir/client/smcr-fuse
for f in "$comp/smcrd" "$comp/smcrctl" "$comp/smcr-attach" "$SMCRD" "$SMCRCTL" "$ATTACH"; do
    [ -e "$f" ] || fail "$f is not built"
done
progs=(smcrd smcrctl smcr-attach)
[ -x "$FUSE" ] && progs+=(smcr-fuse)
[ -x "$FUSE" ] && [ ! -e "$comp/smcr-fuse" ] && fail "smcr-fuse is built, its completion not"
for p in "${progs[@]}"; do
    cmp "$comp/$p" "$abs_top_srcdir/bash-completion/smcrbd.bash" ||
        fail "$comp/$p is not bash-completion/smcrbd.bash"
done

d=$(scratch_dir)
mkdir "$d/certs.d"
touch "$d/conf-a" "$d/conf-b"

path_of() {
    case $1 in
    smcrd) echo "$SMCRD" ;;
    smcrctl) echo "$SMCRCTL" ;;
    smcr-attach) echo "$ATTACH" ;;
    smcr-fuse) echo "$FUSE" ;;
    esac
}

# complete PROGRAM WORD... : the completions of the last WORD, one a line,
# sorted, from a bash that sourced only PROGRAM's completion file.
complete_words() {
    local p=$1
    shift
    (cd "$d" && bash --norc --noprofile -c '
        comp=$1 p=$2 path=$3
        shift 3
        . "$comp/$p" || exit 1
        f=$(complete -p "$p" 2>/dev/null | sed -n "s/.*-F \([^ ]*\) .*/\1/p")
        [ -n "$f" ] || { echo "no completion function for $p" >&2; exit 1; }
        COMP_WORDS=("$path" "$@")
        COMP_CWORD=$#
        "$f" "$p" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
        printf "%s\n" "${COMPREPLY[@]}" | sort' _ "$comp" "$p" "$(path_of "$p")" "$@")
}

expect() {
    local want=$1 got
    shift
    got=$(complete_words "$@" | tr '\n' ' ')
    got=${got% }
    [ "$got" = "$want" ] || fail "complete '$*': got '$got', expected '$want'"
    echo "complete '$*' -> $got"
}

# Every long option of --help (an option line starts "  -x, --name" or
# "      --name", up to two spaces; "-h, --help, -V, --version" names two),
# and only those, for "--".
for p in "${progs[@]}"; do
    "$(path_of "$p")" --help >"$d/help" 2>&1 || true
    grep -E '^(  -[A-Za-z0-9], |      )--' "$d/help" | sed -E 's/^ +//; s/  .*//; s/^([^ ]*=[^ ]*) .*/\1/' |
        grep -oE -- '--[A-Za-z0-9][A-Za-z0-9-]*' | sort -u >"$d/want"
    n=$(wc -l <"$d/want")
    [ "$n" -ge 5 ] || fail "$p --help: only $n long options found"
    complete_words "$p" -- >"$d/got"
    diff -u "$d/want" "$d/got" || fail "$p --: the completions differ from --help's options (-want +got)"
    echo "$p --: all $n long options of --help"
done

expect "stats status" smcrctl st
expect "fail-link fault" smcrctl -j f
expect "fail-link fault" smcrctl -d /tmp f
expect "--log-level" smcrd --log-l
expect "--standby" smcr-attach --sta
expect "debug error info warning" smcrd --log-level ""
expect "debug" smcrd --log-level = d
expect "debug" smcrd --log-level=d
expect "off on require" smcrd --tls ""
expect "false true" smcr-attach --tls-verify-peer ""
expect "off on require" smcr-attach --tls=
expect "smcr tcp" smcr-attach --transport ""
expect "conf-a conf-b" smcrd --config conf-
expect "conf-a conf-b" smcrd -f -c conf
expect "certs.d" smcrd --tls-certificates ""
expect "fail-link fault" smcrctl --dir = /tmp f
# A command is there: no more command words; its TARGET: the names in
# the control socket directory of --dir (files named NAME.PID.sock).
mkdir -m 700 "$d/ctl"
touch "$d/ctl/smcrd.$$.sock" "$d/ctl/smcr-fuse.$$.sock" "$d/ctl/nbdkit.$$.sock"
expect "" smcrctl --dir "$d/ctl" status --json st
expect "smcr-fuse smcrd" smcrctl --dir "$d/ctl" status --json sm
expect "smcr-fuse smcrd" smcrctl --dir = "$d/ctl" fault drop-link=0 sm
expect "smcr-fuse smcrd" smcrctl --dir "$d/ctl" fault delay-link = 0,ms = 5 sm
expect "nbdkit" smcrctl -d "$d/ctl" -j reset n
expect "" smcrctl -d "$d/ctl" reset smcrd ""
echo "PASS: bash completions of ${progs[*]}: --help's long options, smcrctl's commands, values, files"
