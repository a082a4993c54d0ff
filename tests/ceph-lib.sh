# SPDX-License-Identifier: BSD-3-Clause
# A throwaway single-node Ceph cluster for the RBD tests.  Source it after
# functions.sh:
#
#   start_ceph DIR   one ceph-mon and one ceph-osd (memstore) on 127.0.0.1,
#                    cephx on, pool 'rbd' of size 1, all under DIR; stopped
#                    and removed at exit.  Skips (77) when Debian's ceph-mon,
#                    ceph-osd or ceph-common is missing.  Sets CEPH_CONF (the
#                    cluster's config file), CEPH_ID (a client with the rbd
#                    profile on pool 'rbd', its keyring next to CEPH_CONF).
#   ceph_admin ARGS  the ceph tool as client.admin
#   rbd_admin ARGS   the rbd tool as client.admin
#   stop_ceph        stop the daemons (also at exit)
#
# Memstore keeps the objects in the OSD's memory: no disk, quick to start;
# SMCR_CEPH_OSD_MIB (default 512) bounds it.

_ceph_pids=()

ceph_admin() { timeout 60 ceph -c "$_ceph_dir/ceph.conf" -n client.admin "$@"; }
rbd_admin() { timeout 120 rbd -c "$_ceph_dir/ceph.conf" -n client.admin "$@"; }

stop_ceph() {
    local p
    for p in "${_ceph_pids[@]}"; do
        kill "$p" 2>/dev/null || true
    done
    for p in "${_ceph_pids[@]}"; do
        timeout 20 tail --pid="$p" -f /dev/null 2>/dev/null || kill -9 "$p" 2>/dev/null || true
    done
    _ceph_pids=()
}

_ceph_fail() {
    local f
    for f in "$_ceph_dir"/log/*.log; do
        [ -f "$f" ] && { echo "--- $f (tail)"; tail -n 20 "$f"; } >&2
    done
    fail "ceph: $*"
}

start_ceph() {
    local d=$1 port fsid t0=$SECONDS i
    for i in ceph-mon ceph-osd ceph monmaptool ceph-authtool rbd; do
        command -v "$i" >/dev/null 2>&1 ||
            skip "needs $i (Debian's ceph-mon, ceph-osd and ceph-common; scripts/install-deps.sh installs them)"
    done
    _ceph_dir=$d
    mkdir -p "$d/mon" "$d/osd" "$d/run" "$d/log"
    port=$(free_port)
    fsid=$(cat /proc/sys/kernel/random/uuid)
    cat >"$d/ceph.conf" <<EOF
[global]
fsid = $fsid
mon host = [v2:127.0.0.1:$port]
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = $d/\$name.keyring
run dir = $d/run
admin socket = $d/run/\$name.asok
log file = $d/log/\$name.log
pid file = $d/run/\$name.pid
crash dir = $d/crash
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
mon allow pool delete = true
ms bind ipv6 = false
ms bind ipv4 = true
public addr = 127.0.0.1
[mon]
mon data = $d/mon/\$cluster-\$id
mon cluster log file = $d/log/cluster.log
[osd]
osd data = $d/osd/\$cluster-\$id
osd objectstore = memstore
memstore device bytes = $(( ${SMCR_CEPH_OSD_MIB:-512} << 20 ))
osd max object name len = 256
osd max object namespace len = 64
osd op num shards = 1
osd op num threads per shard = 2
EOF
    ceph-authtool --create-keyring "$d/mon..keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null &&
    ceph-authtool --create-keyring "$d/client.admin.keyring" --gen-key -n client.admin \
        --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' &&
    ceph-authtool "$d/mon..keyring" --import-keyring "$d/client.admin.keyring" >/dev/null &&
    monmaptool --create --clobber --fsid "$fsid" --addv a "[v2:127.0.0.1:$port]" "$d/monmap" >/dev/null &&
    ceph-mon -c "$d/ceph.conf" --mkfs -i a --monmap "$d/monmap" --keyring "$d/mon..keyring" ||
        _ceph_fail "mon mkfs"
    cp "$d/mon..keyring" "$d/mon.a.keyring"
    ceph-mon -c "$d/ceph.conf" -f -i a >"$d/log/mon.out" 2>&1 &
    _ceph_pids+=($!)
    cleanup_fn stop_ceph
    export CEPH_CONF=$d/ceph.conf
    wait_for 30 ceph_admin -s --connect-timeout 5 || _ceph_fail "mon did not come up"
    local uuid
    uuid=$(cat /proc/sys/kernel/random/uuid)
    i=$(ceph_admin osd new "$uuid") || _ceph_fail "osd new"
    [ "$i" = 0 ] || _ceph_fail "osd id $i, not 0"
    mkdir -p "$d/osd/ceph-0"
    ceph-osd -c "$d/ceph.conf" --no-mon-config -i 0 --mkfs --mkkey --osd-uuid "$uuid" \
        --keyring "$d/osd.0.keyring" >"$d/log/osd-mkfs.out" 2>&1 || { tail -5 "$d/log/osd-mkfs.out" >&2; _ceph_fail "osd mkfs"; }
    ceph_admin auth add osd.0 osd 'allow *' mon 'allow profile osd' \
        -i "$d/osd.0.keyring" >/dev/null 2>&1 || _ceph_fail "osd auth"
    ceph-osd -c "$d/ceph.conf" -f -i 0 >"$d/log/osd.out" 2>&1 &
    _ceph_pids+=($!)
    _ceph_osd_up() { ceph_admin osd stat -f json | grepq '"num_up_osds":1'; }
    wait_for 60 _ceph_osd_up || _ceph_fail "osd did not come up"
    ceph_admin osd pool create rbd 8 8 >/dev/null 2>&1 || _ceph_fail "pool create"
    rbd_admin pool init rbd || _ceph_fail "rbd pool init"
    CEPH_ID=smcrd
    ceph_admin auth get-or-create client.$CEPH_ID mon 'profile rbd' \
        osd 'profile rbd pool=rbd' -o "$d/client.$CEPH_ID.keyring" >/dev/null 2>&1 ||
        _ceph_fail "client key"
    export CEPH_ID
    echo "ceph: mon and osd up, pool rbd, in $(( SECONDS - t0 )) s"
}
