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

# _ceph_py new UUID | up: mon commands as client.admin (Debian's python3-rados, which ceph-common brings).
_ceph_py() {
    timeout 90 /usr/bin/python3 - "$_ceph_dir/ceph.conf" "$@" <<'EOF'
import json, sys, time
import rados
conf, what = sys.argv[1], sys.argv[2]
c = rados.Rados(conffile=conf, name="client.admin")
c.conf_set("client_mount_timeout", "60")
c.connect(timeout=60)
def cmd(**kw):
    r, out, err = c.mon_command(json.dumps(kw), b"")
    if r < 0:
        sys.exit("%s: %d %s" % (kw["prefix"], r, err))
    return out
if what == "new":
    osd = cmd(prefix="osd new", uuid=sys.argv[3], format="json")
    if json.loads(osd)["osdid"] != 0:
        sys.exit("osd id is not 0: %s" % osd)
    cmd(prefix="osd pool create", pool="rbd", pg_num=8, pgp_num=8)
    cmd(prefix="osd pool application enable", pool="rbd", app="rbd")
else:
    # No mgr: no PG statistics; the first I/O waits for the PGs to peer.
    for i in range(600):
        st = json.loads(cmd(prefix="osd dump", format="json"))
        if [o["up"] for o in st["osds"]] == [1]:
            break
        time.sleep(0.1)
    else:
        sys.exit("osd.0 not up: %s" % st["osds"])
c.shutdown()
EOF
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
    # Every key is made here and the client's and the osd's go into the
    # mon's initial keyring: no auth command later.  The mon commands go
    # through one python3-rados process each, not a ceph(8) run each (its
    # start costs seconds on a busy host).
    CEPH_ID=smcrd
    local uuid
    uuid=$(cat /proc/sys/kernel/random/uuid)
    ceph-authtool --create-keyring "$d/mon..keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null &&
    ceph-authtool --create-keyring "$d/client.admin.keyring" --gen-key -n client.admin \
        --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' >/dev/null &&
    ceph-authtool --create-keyring "$d/client.$CEPH_ID.keyring" --gen-key -n client.$CEPH_ID \
        --cap mon 'profile rbd' --cap osd 'profile rbd pool=rbd' >/dev/null &&
    ceph-authtool --create-keyring "$d/osd.0.keyring" --gen-key -n osd.0 \
        --cap mon 'allow profile osd' --cap osd 'allow *' >/dev/null &&
    for i in client.admin client.$CEPH_ID osd.0; do
        ceph-authtool "$d/mon..keyring" --import-keyring "$d/$i.keyring" >/dev/null || exit 1
    done &&
    monmaptool --create --clobber --fsid "$fsid" --addv a "[v2:127.0.0.1:$port]" "$d/monmap" >/dev/null &&
    ceph-mon -c "$d/ceph.conf" --mkfs -i a --monmap "$d/monmap" --keyring "$d/mon..keyring" ||
        _ceph_fail "mon mkfs"
    cp "$d/mon..keyring" "$d/mon.a.keyring"
    ceph-mon -c "$d/ceph.conf" -f -i a >"$d/log/mon.out" 2>&1 &
    _ceph_pids+=($!)
    cleanup_fn stop_ceph
    export CEPH_CONF=$d/ceph.conf CEPH_ID
    mkdir -p "$d/osd/ceph-0"
    ceph-osd -c "$d/ceph.conf" --no-mon-config -i 0 --mkfs --osd-uuid "$uuid" \
        --keyring "$d/osd.0.keyring" >"$d/log/osd-mkfs.out" 2>&1 ||
        { tail -5 "$d/log/osd-mkfs.out" >&2; _ceph_fail "osd mkfs"; }
    # The osd's id and the pool, then the osd.
    _ceph_py new "$uuid" >"$d/log/py-new.out" 2>&1 ||
        { cat "$d/log/py-new.out" >&2; _ceph_fail "osd new / pool create"; }
    ceph-osd -c "$d/ceph.conf" -f -i 0 >"$d/log/osd.out" 2>&1 &
    _ceph_pids+=($!)
    _ceph_py up >"$d/log/py-up.out" 2>&1 ||
        { cat "$d/log/py-up.out" >&2; _ceph_fail "osd did not come up"; }
    echo "ceph: mon and osd up, pool rbd, in $(( SECONDS - t0 )) s"
}
