#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Who may use a control socket: status and stats for
# anybody who can connect, fault injection and section commands only for
# root, the daemon's user and --ctl-group members (SO_PEERCRED,
# SO_PEERGROUPS); a control directory that
# another user owns or that group/others may write is refused by smcrd
# (no socket, an error naming the directory and its owner) and by smcrctl
# (not read).  Root only (a second uid through
# setpriv); about 30 s on a quiet 2-core host (every smcrctl and python3
# run is a process start), twice that under load.
# smcr-timeout: 180
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
. "$srcdir/test-client-lib.sh"
requires_root
requires setpriv --version
requires python3 --version
id nobody >/dev/null 2>&1 || skip "no user nobody"

d=$(scratch_dir)
chmod 0755 "$d"
# Under /tmp: nobody cannot reach into the test's own scratch directory.
top=$(mktemp -d /tmp/smcrbd-ctl.XXXXXX)
cleanup_fn "rm -rf '$top'"
chmod 0755 "$top"
export SMCR_CTL_DIR=$top/ctl
as_nobody() { setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups "$@"; }

start_smcrd_disk 1M
sock=$SMCR_CTL_DIR/smcrd.$SMCRD_PID.sock
wait_for 10 test -S "$sock"
# A member of the socket's group, say: the socket is open to nobody here.
chmod 0666 "$sock"
as_nobody "$SMCRCTL" stats smcrd >"$d/out" 2>&1 || as_nobody "$SMCRCTL" status smcrd >"$d/out" 2>&1 ||
    { cat "$d/out"; fail "nobody cannot read the status"; }
as_nobody "$SMCRCTL" fail-link 1 smcrd >"$d/out" 2>&1 && fail "nobody failed a link"
grep -q "permission denied: only root or uid 0" "$d/out" || { cat "$d/out"; fail "no refusal for nobody"; }
as_nobody "$SMCRCTL" send smcrd smcrd drop >"$d/out" 2>&1
grep -q "permission denied" "$d/out" || { cat "$d/out"; fail "a section command ran for nobody"; }
# Raw, whatever smcrctl does: fault is refused for nobody, allowed for root.
raw() {
    python3 -c 'import socket,sys
s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"fault fail-link=1\n")
print(s.recv(4096).decode())' "$sock"
}
as_nobody bash -c "$(declare -f raw); sock='$sock' raw" | grepq "permission denied" ||
    fail "raw fault not refused for nobody"
raw | grepq "permission denied" && fail "root refused"
echo "verified: nobody reads status, gets 'permission denied' for fail-link, send, raw fault"
stop_smcrd

# --ctl-group: its members may change state too, by primary or
# supplementary group; the socket is theirs (0660), no chmod needed.
getent group nogroup >/dev/null && getent group daemon >/dev/null ||
    skip "no groups nogroup and daemon"
"$SMCRD" -f -p "$(free_port)" --export "disk=$d/disk.img" --ctl-group no-such-group-here >"$d/out" 2>&1
rc=$?
[ "$rc" = 2 ] || { cat "$d/out"; fail "unknown --ctl-group: exit $rc, not 2"; }
grep -q "no-such-group-here: no such group" "$d/out" || { cat "$d/out"; fail "no reason for the unknown group"; }
start_smcrd --export "disk=$d/disk.img" --ctl-group nogroup
sock=$SMCR_CTL_DIR/smcrd.$SMCRD_PID.sock
wait_for 10 test -S "$sock"
wait_for 10 bash -c "[ \"\$(stat -c %G:%a '$sock')\" = nogroup:660 ]"
as_nobody bash -c "$(declare -f raw); sock='$sock' raw" >"$d/out" 2>&1
grep -q "permission denied" "$d/out" && { cat "$d/out"; fail "nogroup (primary) refused"; }
[ -s "$d/out" ] || fail "no answer for nogroup (primary)"
setpriv --reuid=nobody --regid=daemon --groups=nogroup bash -c "$(declare -f raw); sock='$sock' raw" >"$d/out" 2>&1
grep -q "permission denied" "$d/out" && { cat "$d/out"; fail "nogroup (supplementary) refused"; }
[ -s "$d/out" ] || fail "no answer for nogroup (supplementary)"
as_nobody "$SMCRCTL" fail-link 1 smcrd >"$d/out" 2>&1
grep -q "permission denied" "$d/out" && { cat "$d/out"; fail "smcrctl fail-link refused for nogroup"; }
stop_smcrd
start_smcrd --export "disk=$d/disk.img" --ctl-group daemon
sock=$SMCR_CTL_DIR/smcrd.$SMCRD_PID.sock
wait_for 10 test -S "$sock"
chmod 0666 "$sock"
as_nobody bash -c "$(declare -f raw); sock='$sock' raw" >"$d/out" 2>&1
grep -q "permission denied: only root, uid 0 or group $(getent group daemon | cut -d: -f3)" "$d/out" ||
    { cat "$d/out"; fail "a non-member of --ctl-group was not refused"; }
echo "verified: --ctl-group nogroup lets nobody (primary and supplementary group) inject faults, socket nogroup:660; a non-member is refused; an unknown group exits 2"
stop_smcrd

# Directories smcrd and smcrctl must not trust.
bad() {
    local why=$1
    : >"$SMCRD_LOG"
    start_smcrd --export "disk=$d/disk.img"
    wait_for 5 grep -q "ctl: $SMCR_CTL_DIR: $why: not using it" "$SMCRD_LOG"
    # Loud: an error naming the directory, its owner and what to do.
    grep -q "error: ctl: $SMCR_CTL_DIR: $why: not using it (owner uid $(stat -c %u "$SMCR_CTL_DIR"), mode 0$(stat -c %a "$SMCR_CTL_DIR"); .*NO CONTROL SOCKET: remove the directory or set SMCR_CTL_DIR" "$SMCRD_LOG" ||
        { cat "$SMCRD_LOG"; fail "no loud error about the $why directory"; }
    grep -q "error: no control socket (smcrctl): $SMCR_CTL_DIR: $why" "$SMCRD_LOG" ||
        fail "smcrd did not say the $why directory cost its control socket"
    ls "$SMCR_CTL_DIR" | grepq 'smcrd\.' && fail "smcrd made a socket in a $why directory"
    stop_smcrd
    # A socket planted there is not asked.
    python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' \
        "$SMCR_CTL_DIR/smcrd.$$.sock"
    "$SMCRCTL" list >"$d/out" 2>&1 && fail "smcrctl listed a $why directory"
    grep -q "$why: not trusted" "$d/out" || { cat "$d/out"; fail "smcrctl gave no reason ($why)"; }
    rm -f "$SMCR_CTL_DIR/smcrd.$$.sock"
}
chmod 0777 "$SMCR_CTL_DIR"
bad "writable by group or others"
chmod 0775 "$SMCR_CTL_DIR"
bad "writable by group or others"
chmod 0755 "$SMCR_CTL_DIR"
chown nobody "$SMCR_CTL_DIR"
bad "owned by another user"
echo "verified: smcrd and smcrctl refuse a 0777, a 0775 and a nobody-owned control directory"
