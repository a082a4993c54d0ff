#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# smcr-attach's systemd units, smcr-attach-ublk@.service and
# smcr-attach-ublk-standby@.service, as make install writes them:
#  - the device's server runs smcr-attach --ublk=%i --recover=auto (make
#    the device, else take it over or stand by), the standby
#    --ublk=%i --standby, both with the instance's config file, Type=notify,
#    Restart=on-failure with a short RestartSec, no start limit, and the
#    standby ordered after the server with no dependency that would
#    restart it with the other;
#  - every option in ExecStart is one smcr-attach --help names, and
#    smcr-attach takes the command line as systemd splits it (no usage
#    error, exit 2: here it fails later, exit 1, with no ublk driver or no
#    server);
#  - systemd-analyze verify passes both (ExecStart pointed at this
#    build's smcr-attach); without systemd-analyze that part skips.
# About 2 s.
# smcr-timeout: 60
. "${srcdir:-.}/functions.sh"

ATTACH=$abs_top_builddir/client/smcr-attach
units=(smcr-attach-ublk@.service smcr-attach-ublk-standby@.service)
for u in "${units[@]}"; do
    [ -f "$abs_top_builddir/client/$u" ] || fail "client/$u not built"
done
[ -x "$ATTACH" ] || fail "$ATTACH not built"
d=$(scratch_dir)
help=$("$ATTACH" --help) || fail "smcr-attach --help failed"

srv=$abs_top_builddir/client/smcr-attach-ublk@.service
sb=$abs_top_builddir/client/smcr-attach-ublk-standby@.service
# key FILE KEY: the value of KEY= (one line).
key() {
    local v
    v=$(sed -n "s/^$2=//p" "$1")
    [ "$(printf '%s\n' "$v" | wc -l)" = 1 ] && [ -n "$v" ] || fail "${1##*/}: $2= is not set once: '$v'"
    printf '%s\n' "$v"
}
for u in "$srv" "$sb"; do
    n=${u##*/}
    [ "$(key "$u" Type)" = notify ] || fail "$n: Type= is not notify"
    [ "$(key "$u" Restart)" = on-failure ] || fail "$n: Restart= is not on-failure"
    rs=$(key "$u" RestartSec)
    case $rs in [0-9]*ms|[01]s|[01]) ;; *) fail "$n: RestartSec=$rs, want 1 s or less" ;; esac
    [ "$(key "$u" StartLimitIntervalSec)" = 0 ] || fail "$n: a start limit"
    [ "$(key "$u" RestartPreventExitStatus)" = 2 ] || fail "$n: usage errors (2) are restarted"
    ef=$(key "$u" EnvironmentFile)
    [[ $ef == /*/smcr-attach/ublk%i.conf ]] || fail "$n: EnvironmentFile=$ef"
    grep -qE '^(Requires|BindsTo|PartOf|Requisite)=' "$u" &&
        fail "$n: $(grep -E '^(Requires|BindsTo|PartOf|Requisite)=' "$u"): it would be restarted with another unit"
done
es=$(key "$srv" ExecStart)
[[ $es == /*/smcr-attach\ --ublk=%i\ --recover=auto\ * ]] || fail "${srv##*/}: ExecStart=$es"
eb=$(key "$sb" ExecStart)
[[ $eb == /*/smcr-attach\ --ublk=%i\ --standby\ * ]] || fail "${sb##*/}: ExecStart=$eb"
[ "$(key "$sb" After)" = "smcr-attach-ublk@%i.service" ] ||
    fail "${sb##*/}: not ordered after smcr-attach-ublk@%i.service"
for e in "$es" "$eb"; do
    [[ $e == *' $SMCR_ATTACH_ARGS' ]] || fail "ExecStart does not end with \$SMCR_ATTACH_ARGS: $e"
    # Every option is one of --help's.
    for w in $e; do
        case $w in
        --*) grep -qE -- "^ +(-[a-zA-Z], )?${w%%=*}([ =]|\[|$)" <<<"$help" ||
                 fail "ExecStart's $w is not in smcr-attach --help" ;;
        esac
    done
done
grep -qE -- '^ +--recover\[=auto\] ' <<<"$help" || fail "smcr-attach --help does not describe --recover=auto"
echo "units: Type=notify, Restart=on-failure (RestartSec $(key "$srv" RestartSec) and $(key "$sb" RestartSec)), no start limit; ExecStart's options are smcr-attach's"

# The command lines as systemd runs them (%i = 7; $SMCR_ATTACH_ARGS split
# at white space): parsed without a usage error; they fail for want of a
# ublk driver (this host) or of a server (the port is closed).  Plain TCP
# (-t): no RDMA port scan.
PORT=$(free_port)
args="-t -C 2 127.0.0.1:$PORT disk"
for e in "$es" "$eb"; do
    line=${e//%i/7}
    line=${line/#*\/smcr-attach /}
    line=${line/\$SMCR_ATTACH_ARGS/$args}
    rc=0
    # shellcheck disable=SC2086 # systemd's word splitting
    out=$(SMCR_CTL=0 timeout 30 "$ATTACH" $line 2>&1) || rc=$?
    [ "$rc" = 1 ] || fail "smcr-attach $line: exit $rc, want 1: $out"
    grepq -E 'ublk|refused|connect' <<<"$out" || fail "smcr-attach $line: no reason given: $out"
    grep -qE '^(smcr-attach: |Usage)' <<<"$out" && fail "smcr-attach $line: a usage complaint: $out"
    echo "smcr-attach $line: exit 1: $(tail -n 1 <<<"$out" | sed 's/^.*smcr-attach\[[0-9]*\] //')"
done

# --- systemd-analyze verify -----------------------------------------------------
command -v systemd-analyze >/dev/null || skip "the units' checks above passed; no systemd-analyze for verify"
mkdir "$d/units"
for u in "${units[@]}"; do
    sed "s|^ExecStart=[^ ]*|ExecStart=$ATTACH|" "$abs_top_builddir/client/$u" >"$d/units/$u"
done
out=$(cd "$d/units" && systemd-analyze verify --man=no ./smcr-attach-ublk@0.service \
          ./smcr-attach-ublk-standby@0.service 2>&1) || fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify complains: $out"
# A broken unit is found (the check sees something).
sed 's/^Type=notify/Type=notifi/' "$d/units/${units[0]}" >"$d/units/bad@.service"
out=$(cd "$d/units" && systemd-analyze verify --man=no ./bad@0.service 2>&1) &&
    [ -z "$out" ] && fail "systemd-analyze verify passed a unit with Type=notifi"
echo "units: systemd-analyze verify clean (and it finds Type=notifi)"
echo "PASS: smcr-attach-ublk@.service and smcr-attach-ublk-standby@.service"
