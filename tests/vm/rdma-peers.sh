# SPDX-License-Identifier: BSD-3-Clause
# The RDMA block devices users would pick instead of smcrbd, in the rxe
# lane: NVMe over Fabrics with the RDMA transport (the kernel's nvmet target,
# nvme-rdma host, native NVMe multipath) and RNBD over RTRS (built from
# linux-source by kmod-build.sh rnbd).  Target in B, host in A, one path per
# link (10.1.1.2, 10.1.2.2: vm_start_pair's default per-link subnets).
# Shared by vm/rdma-block-peers.sh and bench/bench-block-vm.sh.  Source it
# after lib.sh:
#     . "$(dirname "$0")/rdma-peers.sh"
#
#   nvmeof_requires          skip (77) unless nvme-cli and the kernel's
#                            nvmet, nvmet-rdma and nvme-rdma are there
#   rnbd_requires            build (or reuse) the RNBD/RTRS modules: 0 and
#                            RNBD_KO_DIR set, or 77 with the reason on stderr
#                            (no kernel source/headers); other: build failed
#   nvmet_export FILE        B: subsystem $NVMEOF_NQN, namespace 1 on FILE
#                            (buffered_io=1 when FILE's filesystem cannot do
#                            O_DIRECT, as tmpfs), ports 1 and 2 on 4420;
#                            FILE not on the guest's overlay root (nvmet
#                            takes its block size from i_blkbits, 0 there):
#                            /dev/shm is a plain tmpfs
#   nvmet_unexport           B: undo nvmet_export
#   nvmeof_attach            A: nvme connect to both ports (with
#                            $NVMEOF_CONNECT_OPTS, e.g. --reconnect-delay=2;
#                            default none: nvme-cli's defaults); prints the
#                            multipath block device (/dev/nvmeXnY); fails
#                            unless both controllers are live
#   nvmeof_detach            A: nvme disconnect
#   rnbd_export FILE         B: the RNBD/RTRS server modules, FILE on a loop
#                            device (rnbd-server opens block devices only);
#                            sets RNBD_LOOP
#   rnbd_unexport            B: detach the loop device
#   rnbd_attach              A: the client modules, map $RNBD_LOOP over both
#                            links (session $RNBD_SESS); prints /dev/rnbdN;
#                            fails unless both paths are connected
#   rnbd_detach              A: unmap
# rtrs-server runs with always_invalidate=N: with Y it registers a chunk's
# MR again before its invalidation completes and 6.1's rxe refuses
# ("rxe_reg_fast_mr: mr->lkey = ... not free"), which hangs I/O at qd > 1.
# Knobs: RNBD_QUEUE_DEPTH (rtrs-server's sess_queue_depth, default 128: its
# buffers are depth x 128 KiB per path, in a 768 MiB guest).

NVMEOF_NQN=nqn.2026-11.org.smcrbd:peer
NVMEOF_HOSTNQN=nqn.2026-11.org.smcrbd:host-a
RNBD_SESS=smcrbd-peer
: "${RNBD_QUEUE_DEPTH:=128}"

nvmeof_requires() {
    [ -x /usr/sbin/nvme ] || command -v nvme >/dev/null 2>&1 ||
        skip "no nvme (Debian package nvme-cli)"
    local m
    for m in nvmet nvmet-rdma nvme-rdma; do
        modprobe -S "$VM_KVER" -n "$m" >/dev/null 2>&1 ||
            skip "kernel $VM_KVER has no module $m"
    done
}

rnbd_requires() {
    local rc=0
    RNBD_KO_DIR=$(vm_kmod_build rnbd) || rc=$?
    [ "$rc" = 0 ] && export RNBD_KO_DIR
    return "$rc"
}

# The guest side of nvmet_export (FILE NQN ADDR1 ADDR2).
_nvmet_export_sh='
set -eu
file=$1 nqn=$2
modprobe -a nvmet nvmet-rdma
mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
cd /sys/kernel/config/nvmet
mkdir "subsystems/$nqn"
echo 1 >"subsystems/$nqn/attr_allow_any_host"
ns=subsystems/$nqn/namespaces/1
mkdir "$ns"
printf %s "$file" >"$ns/device_path"
# nvmet opens a file with O_DIRECT unless buffered_io is set.
if ! dd if="$file" of=/dev/null bs=4k count=1 iflag=direct status=none 2>/dev/null; then
    echo 1 >"$ns/buffered_io"
fi
echo 1 >"$ns/enable"
p=0
shift 2
for a in "$@"; do
    p=$((p + 1))
    mkdir "ports/$p"
    echo rdma >"ports/$p/addr_trtype"
    echo ipv4 >"ports/$p/addr_adrfam"
    echo "$a" >"ports/$p/addr_traddr"
    echo 4420 >"ports/$p/addr_trsvcid"
    ln -s "/sys/kernel/config/nvmet/subsystems/$nqn" "ports/$p/subsystems/$nqn"
done
echo "nvmet: $nqn on $file (buffered_io $(cat "$ns/buffered_io")), rdma ports $*:4420"
'

nvmet_export() {
    vm_run B "bash -c $(printf %q "$_nvmet_export_sh") nvmet $(printf %q "$1") $NVMEOF_NQN $(vm_ip B 1) $(vm_ip B 2)"
}

nvmet_unexport() {
    vm_run B "
cd /sys/kernel/config/nvmet || exit 0
for p in ports/*; do [ -e \"\$p\" ] || continue; rm -f \"\$p/subsystems/$NVMEOF_NQN\"; rmdir \"\$p\"; done
s=subsystems/$NVMEOF_NQN
[ -d \"\$s\" ] || exit 0
echo 0 >\"\$s/namespaces/1/enable\"
rmdir \"\$s/namespaces/1\" \"\$s\""
}

nvmeof_attach() {
    vm_run A "
set -eu
modprobe nvme-rdma
for a in $(vm_ip B 1) $(vm_ip B 2); do
    nvme connect -t rdma -a \$a -s 4420 -n $NVMEOF_NQN --hostnqn=$NVMEOF_HOSTNQN ${NVMEOF_CONNECT_OPTS:-} >/dev/null
done
for s in /sys/class/nvme-subsystem/*; do
    [ \"\$(cat \$s/subsysnqn)\" = $NVMEOF_NQN ] || continue
    live=0 n=0
    for c in \$s/nvme*; do
        [[ \${c##*/} =~ ^nvme[0-9]+\$ ]] || continue
        n=\$((n + 1))
        [ \"\$(cat \$c/state)\" = live ] && live=\$((live + 1))
    done
    [ \$live = 2 ] || { echo \"nvme-rdma: \$live of \$n controllers live\" >&2; exit 1; }
    for d in \$s/nvme*n*; do
        [[ \${d##*/} =~ ^nvme[0-9]+n[0-9]+\$ ]] || continue
        [ -b /dev/\${d##*/} ] || continue
        # The namespace scan sets the capacity a moment after the node.
        for i in \$(seq 100); do
            [ \$(blockdev --getsize64 /dev/\${d##*/}) -gt 0 ] && { echo /dev/\${d##*/}; exit 0; }
            sleep 0.1
        done
    done
done
echo 'nvme-rdma: no multipath block device with a size for $NVMEOF_NQN' >&2
exit 1"
}

nvmeof_detach() {
    vm_run A "nvme disconnect -n $NVMEOF_NQN >/dev/null"
}

rnbd_export() {
    RNBD_LOOP=$(vm_run B "
set -eu
modprobe -a rdma_cm ib_core loop
lsmod | grep -q '^rtrs_server ' || {
    insmod $RNBD_KO_DIR/rtrs-core.ko
    insmod $RNBD_KO_DIR/rtrs-server.ko sess_queue_depth=$RNBD_QUEUE_DEPTH always_invalidate=N
    insmod $RNBD_KO_DIR/rnbd-server.ko
}
losetup -f --show $(printf %q "$1")") || return 1
    echo "rnbd-server: $1 as $RNBD_LOOP"
}

rnbd_unexport() {
    [ -n "${RNBD_LOOP:-}" ] || return 0
    vm_run B "losetup -d $RNBD_LOOP"
}

rnbd_attach() {
    vm_run A "
set -eu
modprobe -a rdma_cm ib_core
lsmod | grep -q '^rnbd_client ' || {
    lsmod | grep -q '^rtrs_core ' || insmod $RNBD_KO_DIR/rtrs-core.ko
    insmod $RNBD_KO_DIR/rtrs-client.ko
    insmod $RNBD_KO_DIR/rnbd-client.ko
}
echo 'sessname=$RNBD_SESS path=ip:$(vm_ip B 1) path=ip:$(vm_ip B 2) device_path=$RNBD_LOOP access_mode=rw' \
    >/sys/devices/virtual/rnbd-client/ctl/map_device
n=0
for p in /sys/class/rtrs-client/$RNBD_SESS/paths/*; do
    [ \"\$(cat \$p/state)\" = connected ] && n=\$((n + 1))
done
[ \$n = 2 ] || { echo \"rnbd: \$n of 2 paths connected\" >&2; exit 1; }
for d in /sys/block/rnbd*; do
    [ -b /dev/\${d##*/} ] || continue
    for i in \$(seq 100); do
        [ \$(blockdev --getsize64 /dev/\${d##*/}) -gt 0 ] && { echo /dev/\${d##*/}; exit 0; }
        sleep 0.1
    done
done
echo 'rnbd: no block device' >&2
exit 1"
}

rnbd_detach() {
    vm_run A "for d in /sys/block/rnbd*; do [ -e \"\$d/rnbd/unmap_device\" ] && echo normal >\"\$d/rnbd/unmap_device\"; done; true"
}
