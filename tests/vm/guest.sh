#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The rxe lane's guest agent: PID 1 inside each VM after the initramfs has
# switch_rooted into the overlay on the host's root filesystem.
#
# Kernel command line (set by lib.sh):
#   smcr.name=A          the VM's name (its role: A, B, ...)
#   smcr.idx=1           host number: the VM's address on link L is 10.1.L.idx
#   smcr.links=2         number of virtio NICs (eth0 = link 1, eth1 = link 2)
#   smcr.share=DIR       the host directory shared read-write (9p tag
#                        "smcrshare"), mounted at the same path in the guest
#   smcr.script=PATH     optional: run "PATH NAME ARGS..." once set up,
#   smcr.args=a,b,c      as command "boot" (see below)
#   smcr.rxe=PATH        optional: insmod this rdma_rxe.ko (the patched one
#                        of kmod-build.sh) instead of the stock module
#   smcr.nbd=PATH        optional: insmod this nbd.ko (kmod-build.sh's) at
#                        boot, so that "modprobe nbd" finds it loaded
#   smcr.subnet=one      optional: every NIC on 10.1.1.0/24, NIC L with
#                        10.1.1.(16(L-1)+idx) and the route 10.1.1.16(L-1)/28
#                        through it; each address answers ARP only on its
#                        own NIC (arp_ignore=1, arp_announce=2), rp_filter 0
#
# It mounts the basic filesystems, loads virtio_net + rdma_rxe + ib_uverbs,
# puts 10.1.L.idx/24 on eth(L-1) (or see smcr.subnet) and an rxe device rxe(L-1) on top of it,
# writes DIR/ready and then serves commands: the host drops DIR/cmd/ID.sh,
# the agent moves it to DIR/run/ and runs it in the background with
# stdout/stderr in DIR/out/ID.out and DIR/out/ID.err and, when it ends, its
# exit status in DIR/out/ID.rc.  DIR/halt makes the agent power the VM off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 TERM=dumb
t0=${EPOCHREALTIME/./}

# Static busybox for the small tools: an exec of a dynamic binary from the
# 9p root costs ~100 ms under TCG, busybox ~20 ms.
bb() { /bin/busybox "$@"; }
say() { echo "guest ${name:-?}: $*" >/dev/console; }
halt_now() {
    bb sync
    bb poweroff -f
    bb sleep 10
}
die() { say "FATAL: $*"; [ -n "${share:-}" ] && echo "$*" >"$share/fatal"; halt_now; }

bb mount -t proc proc /proc
bb mount -t sysfs sysfs /sys
# cgroup v2: libsmcr attaches its SYN option program there (smcr/synopt.c).
bb mount -t cgroup2 cgroup2 /sys/fs/cgroup || say "no cgroup2: libsmcr runs with syn-option=off"
bb mount -t tmpfs -o mode=0755 tmpfs /run
bb mkdir -p /dev/pts /dev/shm
bb mount -t devpts devpts /dev/pts
bb mount -t tmpfs -o mode=1777 tmpfs /dev/shm

name=X idx=1 links=0 share= script= args= rxe= nbd= subnet=per-link build=
for arg in $(</proc/cmdline); do
    case $arg in
        smcr.name=*)   name=${arg#*=} ;;
        smcr.idx=*)    idx=${arg#*=} ;;
        smcr.links=*)  links=${arg#*=} ;;
        smcr.share=*)  share=${arg#*=} ;;
        smcr.script=*) script=${arg#*=} ;;
        smcr.args=*)   args=${arg#*=} ;;
        smcr.rxe=*)    rxe=${arg#*=} ;;
        smcr.nbd=*)    nbd=${arg#*=} ;;
        smcr.subnet=*) subnet=${arg#*=} ;;
        smcr.build=*)  build=${arg#*=} ;;
    esac
done
[ -n "$share" ] || die "no smcr.share= on the kernel command line"
echo "smcr-$name" >/proc/sys/kernel/hostname
bb ip link set lo up
ulimit -l unlimited
ulimit -c 0

bb mkdir -p "$share"
bb mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288,cache=none \
    smcrshare "$share" || die "cannot mount the shared directory at $share"
bb mkdir -p "$share/cmd" "$share/run" "$share/out" || die "shared directory not writable"

# The IPv4 address of link $1 (1, 2, ...): "NET HOST".
link_addr() {
    if [ "$subnet" = one ]; then
        echo "1 $(( 16 * ($1 - 1) + idx ))"
    else
        echo "$1 $idx"
    fi
}

# Waits until rxe device $1 has the RoCE v2 GID of link $2's IPv4 address.
wait_gid() {
    local dev=$1 want g i n a
    read -r -a a <<<"$(link_addr "$2")"
    want=$(printf '0000:0000:0000:0000:0000:ffff:0a01:%02x%02x' "${a[0]}" "${a[1]}")
    for (( n=0; n<200; n++ )); do
        for (( i=0; i<16; i++ )); do
            read -r g 2>/dev/null <"/sys/class/infiniband/$dev/ports/1/gids/$i" || continue
            [ "$g" = "$want" ] && return 0
        done
        read -r -t 0.05 -u 9 _
    done
    echo "rxe device $dev has no GID for 10.1.${a[0]}.${a[1]}"
    return 1
}

# rdma_rxe and ib_uverbs: the stock modules, or the patched rxe after the
# stock modules it depends on (the kernel is tainted: unsigned module); and
# the patched nbd when asked for.
load_modules() {
    if [ -n "$rxe" ]; then
        modprobe -a udp_tunnel ip6_udp_tunnel ib_core ib_uverbs &&
            insmod "$rxe"
    else
        modprobe -a rdma_rxe ib_uverbs
    fi || return 1
    # nbd.ko needs no other module.
    [ -z "$nbd" ] || insmod "$nbd"
}

setup_links() {
    local i dev n a
    modprobe virtio_net && load_modules || return 1
    if [ "$subnet" = one ]; then
        sysctl -qw net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2 \
            net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 || return 1
    fi
    for (( i=0; i<links; i++ )); do
        dev=eth$i
        for (( n=0; n<100; n++ )); do
            [ -e "/sys/class/net/$dev" ] && break
            read -r -t 0.05 -u 9 _
        done
        [ -e "/sys/class/net/$dev" ] || { echo "no $dev"; return 1; }
        read -r -a a <<<"$(link_addr $((i+1)))"
        [ "$subnet" = one ] && { sysctl -qw "net.ipv4.conf.$dev.rp_filter=0" || return 1; }
        bb ip addr add "10.1.${a[0]}.${a[1]}/24" dev "$dev" || return 1
        bb ip link set "$dev" up || return 1
        if [ "$subnet" = one ]; then
            ip route add "10.1.1.$((16 * i))/28" dev "$dev" src "10.1.1.${a[1]}" || return 1
        fi
        rdma link add "rxe$i" type rxe netdev "$dev" || return 1
    done
    for (( i=0; i<links; i++ )); do
        wait_gid "rxe$i" $((i+1)) || return 1
    done
}
# A FIFO nobody writes: "read -t" on it sleeps without forking.
bb mkfifo /run/agent-tick
exec 9<>/run/agent-tick
if [ "$links" -gt 0 ]; then
    setup_links >"$share/setup.log" 2>&1 || die "link setup failed: $(bb tail -n 5 "$share/setup.log")"
else
    load_modules >"$share/setup.log" 2>&1
fi
# The build tree's programs that link libsmcr.so (smcrd, smcrctl, ...) are
# libtool wrapper scripts, and under TCG each start of one costs a second or
# more of bash: the guest runs the real program in its place (a bind mount
# over the overlay) and every job finds libsmcr.so in the build tree.
unwrap_build() {
    local real prog line
    [ -n "$build" ] && [ -e "$build/smcr/.libs/libsmcr.so" ] || return 0
    export LD_LIBRARY_PATH=$build/smcr/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    for real in "$build"/*/.libs/*; do
        [ -f "$real" ] && [ -x "$real" ] || continue
        case $real in *.so|*.so.*|*.la|*.lai|*.a|*.exp|*.ver) continue ;; esac
        prog=${real%/.libs/*}/${real##*/}
        [ -f "$prog" ] || continue
        { read -r line; read -r line; read -r line; } <"$prog" 2>/dev/null || continue
        [ "$line" = "# ${real##*/} - temporary wrapper script for .libs/${real##*/}" ] || continue
        bb mount --bind "$real" "$prog" || echo "cannot bind $real over $prog"
    done
}
unwrap_build >>"$share/setup.log" 2>&1
{
    echo "kernel $(</proc/sys/kernel/osrelease) after $(( (${EPOCHREALTIME/./} - t0) / 1000 )) ms in userspace"
    bb ip -o -4 addr show
} >"$share/ready.tmp"
bb mv "$share/ready.tmp" "$share/ready"
say "ready ($(( (${EPOCHREALTIME/./} - t0) / 1000 )) ms)"

# The agent.  One background job per command; bash (PID 1) reaps them and
# anything orphaned.  It polls the command directory every 50 ms.
start_cmd() {
    local id=$1
    bb mv "$share/cmd/$id.sh" "$share/run/$id.sh" || return
    (
        cd /
        bash "$share/run/$id.sh" >"$share/out/$id.out" 2>"$share/out/$id.err" </dev/null
        echo $? >"$share/out/$id.rc.tmp"
        bb mv "$share/out/$id.rc.tmp" "$share/out/$id.rc"
    ) &
}
if [ -n "$script" ]; then
    IFS=, read -r -a argv <<<"$args"
    printf '%q ' "$script" "$name" "${argv[@]}" >"$share/cmd/.boot.tmp"
    echo >>"$share/cmd/.boot.tmp"
    bb mv "$share/cmd/.boot.tmp" "$share/cmd/boot.sh"
fi
shopt -s nullglob
while :; do
    for f in "$share"/cmd/*.sh; do
        f=${f##*/}
        start_cmd "${f%.sh}"
    done
    [ -e "$share/halt" ] && break
    read -r -t 0.05 -u 9 _
done
say "halting"
halt_now
