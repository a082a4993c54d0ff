# SPDX-License-Identifier: BSD-3-Clause
# The rxe VM lane: boot Debian's stock kernel under qemu (TCG) with the host's
# root filesystem shared read-only, one or two VMs ("hosts" A and B), each
# with up to two virtio NICs; NIC L of A and NIC L of B form link L, a
# "-netdev dgram" UDP pair on 127.0.0.1.  Every NIC carries an rxe device.
# See tests/vm/README.md and design.md §4.
#
# Source it from a VM test (it sources ../functions.sh):
#     . "$(dirname "$0")/lib.sh"
#
#   vm_requires              skip (77) unless qemu, the kernel, its modules,
#                            busybox and root are there; sets VM_KERNEL,
#                            VM_KVER (e.g. 6.12.117+deb12-amd64) and
#                            VM_KSERIES (6.12)
#   vm_kernel SERIES         this test runs on kernel SERIES only (e.g.
#                            "vm_kernel 6.12"): picks it when SMCR_VM_KERNEL
#                            is unset, skips (77) with the reason when
#                            SMCR_VM_KERNEL names another series or the
#                            image is not installed; call before or after
#                            vm_requires, before the VMs start
#   vm_kernel_ge SERIES      true when the chosen kernel is SERIES or newer
#                            (for what a test asserts per kernel)
#   vm_start_pair            boot A and B with two links each; returns when
#                            both are set up (10.1.L.1 = A, 10.1.L.2 = B,
#                            rxe0 on eth0 = link 1, rxe1 on eth1 = link 2)
#   vm_start_single [LINKS]  boot A alone (no NICs unless LINKS > 0)
#   vm_start NAME IDX LINKS [SCRIPT [ARGS,...]]
#                            boot one VM (low level: vm_start_pair is two of
#                            these plus the port plumbing); SCRIPT runs in
#                            the guest as "SCRIPT NAME ARGS..." (job "boot")
#   vm_run [-t SECS] NAME CMD...
#                            run CMD (a shell string) in VM NAME; blocks,
#                            prints its stdout/stderr, returns its status
#   vm_bg NAME CMD...        start CMD in the background, print its job id
#   vm_wait [-t SECS] NAME ID
#                            wait for a job, print its output, return status
#   vm_ip NAME LINK          print the VM's address on link LINK (10.1.L.idx,
#                            or 10.1.1.(16(L-1)+idx) with SMCR_VM_SUBNET=one)
#   vm_ifup NAME LINK        "ip link set up" of the VM's NIC on link LINK,
#                            and with SMCR_VM_SUBNET=one its /28 route again
#                            (a link down removes it; up brings back only
#                            the connected /24)
#   vm_link NAME LINK on|off set_link on the VM's side of link LINK (the
#                            guest sees carrier loss on that NIC)
#   vm_cable LINK on|off     both ends of link LINK: a pulled cable
#   vm_qmp NAME JSON         send one QMP command, print the reply
#   vm_hmp NAME CMD          human monitor command through QMP
#   vm_pause NAME SECS       qemu stop, SECS, cont (prints the host times)
#   vm_share NAME            print the VM's shared read-write directory (the
#                            same path inside the guest)
#   vm_log NAME              print the path of the VM's serial log
#   vm_listening NAME PORT   wait (10 s) until a TCP server listens on PORT
#                            in the VM, or fail
#   vm_dumpcap NAME ARGS     start "dumpcap -q ARGS" in the VM, wait until it
#                            captures (or fail), its job id in $vm_cap
#   vm_out NAME JOB          a job's output so far
#   vm_wait_out NAME JOB RE SECS [N]  wait for N (1) output lines matching RE
#   vm_stop [NAME...]        power the VMs off (all by default) and wait
#   vm_quit NAME...          qemu quits at once (no shutdown in the guest)
#
# Commands run in the guest as root in bash, with cwd and the abs_* variables
# of the host test, and see the host's files (so ${abs_top_builddir} binaries
# work) with a tmpfs overlay on top.  Environment knobs:
#   SMCR_VM_KERNEL   the guests' kernel: a series ("6.1", "6.12": the
#                    newest /boot/vmlinuz-<series>.*-amd64 of Debian's
#                    generic flavour) or a path to a vmlinuz (its modules
#                    in /lib/modules/<version>); default 6.1 (Debian 12's
#                    linux-image-amd64).  Never "the newest in /boot".
#   SMCR_VM_MEM      MiB per VM (default 768)
#   SMCR_VM_ACCEL    qemu accelerator (default tcg; a /dev/kvm may exist and
#                    still not run these guests, so KVM is opt-in: "kvm")
#   SMCR_VM_CPU      qemu's -cpu (default qemu64; "qemu64,-cx16" on 6.12: see
#                    _vm_cpu)
#   SMCR_VM_TIMEOUT  watchdog: kill a VM after this many seconds (default
#                    240; keep it below the test's "# smcr-timeout")
#   SMCR_VM_CMD_TIMEOUT  default limit of vm_run / vm_wait (default 120)
#   SMCR_VM_APPEND   extra kernel command line (e.g. "loglevel=7" to see
#                    the kernel's messages in the serial log)
#   SMCR_VM_QEMU_ARGS  extra qemu arguments (word-split)
#   SMCR_VM_RXE      "smc": the guests load rdma_rxe.ko built with
#                    rxe-smc-fixes.patch (kmod-build.sh; what the kernel's
#                    AF_SMC needs) instead of the stock module (default);
#                    on 6.12 the stock module (it has both fixes)
#   SMCR_VM_NBD      "smc": the guests load nbd.ko built with nbd-smc.patch
#                    (kmod-build.sh; takes AF_SMC sockets) at boot instead
#                    of the stock module (default: not loaded at boot)
#   SMCR_VM_SUBNET   "one": all NICs of a VM on one subnet, 10.1.1.0/24
#                    (link L: 10.1.1.(16(L-1)+idx), its /28 routed through
#                    its NIC, ARP answered only on the address's own NIC;
#                    what Linux's AF_SMC needs for a second SMC-Rv2 link);
#                    default "per-link": link L is 10.1.L.0/24
#   SMCR_VM_WORKDIR  where logs and shared dirs go (default:
#                    ${abs_builddir}/vm/<test name>.d, kept after the test)
#   SMCR_VM_BUSY     N: run "stress-ng --cpu N" beside the VMs while the
#                    test runs (a busy CI host; stopped at exit); the time
#                    limits are then 3 times as long (SMCR_VM_SLOW)
#   SMCR_VM_SLOW     F: multiply every time limit by F

_vm_libdir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$_vm_libdir/../functions.sh"
# The test's own stdout and stderr: a VM that dies under a command whose
# output is discarded or captured ("eval CUT >/dev/null", "x=$(vm_run ..)")
# still gets its FAIL line and, at exit, its serial logs into the test's log.
exec {_vm_fd_out}>&1 {_vm_fd_err}>&2

# Under heavy load qemu now and then stops a guest's virtio-net transmit
# queue for good (the guest logs "NETDEV WATCHDOG ... transmit queue 0 timed
# out"): nothing leaves that NIC again, whatever runs above it (seen in the
# soak and in smcr-failover with fuzzers beside it).  A test that fails
# then has met the lane failing, not smcrbd: it is a skip with the
# evidence; every other failure stays a failure.
fail() {
    local v
    for v in "${_vm_names[@]}"; do
        if [ -n "${_vm_dir[$v]:-}" ] && grep -q 'NETDEV WATCHDOG' "${_vm_dir[$v]}/serial.log" 2>/dev/null; then
            echo "$(basename "$0"): $*" >&2
            grep -m 2 'NETDEV WATCHDOG' "${_vm_dir[$v]}/serial.log" | sed "s/^/  VM $v: /" >&2
            skip "the lane's network stalled: VM $v's virtio-net transmit queue stopped (qemu under load), not an smcrbd failure; rerun"
        fi
    done
    echo "FAIL: $(basename "$0"): $*" >&"$_vm_fd_err"
    exit 1
}

: "${SMCR_VM_MEM:=768}"
# virtio-net device options of the link NICs (SMCR_VM_NIC_OPTS; empty:
# qemu's defaults).  Without them a guest's transmit queue now and then
# stopped for good under load (see fail above).
_vm_nic_opts=${SMCR_VM_NIC_OPTS-event_idx=off,ioeventfd=off}
: "${SMCR_VM_TIMEOUT:=240}"
: "${SMCR_VM_CMD_TIMEOUT:=120}"
# SMCR_VM_SLOW=F (default 3 with SMCR_VM_BUSY, else 1) multiplies the time
# limits: the watchdog, vm_run/vm_wait's (tests/run-test does the same to
# the test's own).  A busy host slows everything; the product must cope.
_vm_slow=${SMCR_VM_SLOW:-1}
[ -n "${SMCR_VM_BUSY:-}" ] && [ "$SMCR_VM_BUSY" != 0 ] && _vm_slow=${SMCR_VM_SLOW:-3}
SMCR_VM_TIMEOUT=$((SMCR_VM_TIMEOUT * _vm_slow))
SMCR_VM_CMD_TIMEOUT=$((SMCR_VM_CMD_TIMEOUT * _vm_slow))
: "${abs_builddir:=$abs_top_builddir/tests}"

# Modules the initramfs loads to reach the host root (with dependencies).
VM_INITRAMFS_MODULES="virtio_pci 9pnet_virtio 9p overlay"

declare -A _vm_dir _vm_idx _vm_links _vm_sock
_vm_names=()
_vm_t0=${EPOCHREALTIME/./}

_vm_ms() { echo $(( (${EPOCHREALTIME/./} - _vm_t0) / 1000 )); }
vm_say() { echo "[vm $(printf '%6.1f' "$(_vm_ms)e-3")s] $*"; }

# The lane's default kernel series: Debian 12's own (linux-image-amd64).
VM_KERNEL_DEFAULT=6.1

# _vm_kernel_path SPEC (kernel-path.sh, shared with kmod-prebuild.sh)
. "$_vm_libdir/kernel-path.sh"

# _vm_kernel_series VERSION: 6.12.117+deb12-amd64 -> 6.12, 6.1.0-57-amd64 -> 6.1
_vm_kernel_series() {
    local v=${1%%[-+]*}
    v=${v%.*}
    case $v in *.*) echo "$v" ;; *) echo "$1" ;; esac
}

# _vm_series_pkg SERIES: the Debian package with that series' image.
_vm_series_pkg() {
    if [ "$1" = "$VM_KERNEL_DEFAULT" ]; then echo linux-image-amd64
    else echo "linux-image-$1-amd64"; fi
}

vm_kernel() {
    local want=$1 spec=${SMCR_VM_KERNEL:-} k have
    if [ -z "$spec" ]; then
        # make check's 6.12 tests run with SMCR_VM_612=1 (scripts/check.sh's
        # default), =core or =ublk (or an explicit SMCR_VM_KERNEL=6.12): a
        # plain make check leaves their lane time out (tests/vm/README.md,
        # "Two kernels").  Each of the three takes the tests that need 6.12
        # itself (smcr-attach-ublk.sh).
        if [ "$want" = 6.12 ]; then
            case ${SMCR_VM_612:-0} in
                1 | core | ublk) ;;
                *) skip "needs kernel 6.12: the 6.12 lane runs with SMCR_VM_612=1, =core or =ublk (tests/vm/README.md, \"Two kernels\")" ;;
            esac
        fi
        k=$(_vm_kernel_path "$want") ||
            skip "needs kernel $want: no /boot/vmlinuz-$want.*-amd64 (Debian package $(_vm_series_pkg "$want"))"
        SMCR_VM_KERNEL=$k
    else
        k=$(_vm_kernel_path "$spec") || skip "SMCR_VM_KERNEL=$spec: no such kernel image"
        have=$(_vm_kernel_series "${k##*/vmlinuz-}")
        [ "$have" = "$want" ] ||
            skip "needs kernel $want, SMCR_VM_KERNEL=$spec is $have"
    fi
    export SMCR_VM_KERNEL
    # After vm_requires: check the new choice the same way.
    [ -z "${VM_KVER:-}" ] || vm_requires
}

# _vm_cpu: the guests' qemu CPU model.  6.12 guests get qemu64 without
# CMPXCHG16B: under this host's QEMU 7.2 TCG an interrupt taken just after
# SLUB's "cmpxchg16b %gs:(%rsi)" (its per-CPU fast path, reached from
# rdma_rxe's skb allocations) saved an EFLAGS made of the stale operand of
# the "add %rdi,%rax" before it (the saved EFLAGS was RDI's low 32 bits |
# 0x202 in both oopses kept), and the return from the interrupt
# double-faulted ("double fault" in __kmalloc_node_track_caller_noprof,
# EFLAGS with bits that cannot be set in 64-bit mode).  Without the CPU
# flag SLUB takes its locked path and never runs that instruction.  6.1
# keeps qemu64 (never seen there).
_vm_cpu() {
    if [ -n "${SMCR_VM_CPU:-}" ]; then
        echo "$SMCR_VM_CPU"
    elif [ -n "${VM_KSERIES:-}" ] && vm_kernel_ge 6.12; then
        echo "qemu64,-cx16"
    else
        echo qemu64
    fi
}

vm_kernel_ge() {
    local a=${VM_KSERIES:?vm_requires first} b=$1
    [ "$(printf '%s\n%s\n' "$b" "$a" | sort -V | head -n 1)" = "$b" ]
}

vm_requires() {
    requires_root
    command -v qemu-system-x86_64 >/dev/null 2>&1 ||
        skip "qemu-system-x86_64 not found (Debian package qemu-system-x86)"
    local spec=${SMCR_VM_KERNEL:-$VM_KERNEL_DEFAULT}
    VM_KERNEL=$(_vm_kernel_path "$spec") || {
        case $spec in
            */*) skip "SMCR_VM_KERNEL=$spec: no such kernel image" ;;
            [0-9]*.[0-9]*) skip "no kernel $spec: no /boot/vmlinuz-$spec.*-amd64 (Debian package $(_vm_series_pkg "$spec"))" ;;
            *) fail "SMCR_VM_KERNEL: a series (6.1, 6.12) or a path to a vmlinuz, not '$spec'" ;;
        esac
    }
    VM_KVER=${VM_KERNEL##*/vmlinuz-}
    VM_KSERIES=$(_vm_kernel_series "$VM_KVER")
    [ -f "/lib/modules/$VM_KVER/modules.dep" ] ||
        skip "no modules for kernel $VM_KVER in /lib/modules"
    [ -x /bin/busybox ] ||
        skip "no /bin/busybox (Debian package busybox-static)"
    command -v modprobe >/dev/null 2>&1 || skip "no modprobe (Debian package kmod)"
    for m in rdma_rxe ib_uverbs virtio_net 9p overlay; do
        modprobe -S "$VM_KVER" -n "$m" >/dev/null 2>&1 ||
            skip "kernel $VM_KVER has no module $m"
    done
    export VM_KERNEL VM_KVER VM_KSERIES
}

# vm_kmod_build MOD: builds (or reuses) the patched module MOD (rxe or nbd,
# kmod-build.sh) for VM_KVER and prints its path; 77 when the kernel
# source or headers are absent.
vm_kmod_build() {
    bash "$_vm_libdir/kmod-build.sh" "$1" "$VM_KVER" "$abs_top_builddir/tests/vm/kmod-$VM_KVER/$1"
}

# _vm_kmod MOD KNOB VAR: with KNOB=smc, exports the path of the patched MOD
# in VAR (a skip when it cannot be built).
_vm_kmod() {
    local mod=$1 knob=$2 var=$3 rc=0 ko
    [ -z "${!var:-}" ] || return 0
    case ${!knob:-stock} in
        stock) return 0 ;;
        smc) ;;
        *) fail "$knob: stock or smc, not '${!knob}'" ;;
    esac
    # 6.12's stock rdma_rxe has both fixes of rxe-smc-fixes.patch.
    if [ "$mod" = rxe ] && vm_kernel_ge 6.12; then
        vm_say "kernel $VM_KVER: the stock rdma_rxe (it has the fixes AF_SMC needs)"
        return 0
    fi
    ko=$(vm_kmod_build "$mod") || rc=$?
    [ "$rc" = 77 ] && skip "cannot build the patched $mod module (see above)"
    [ "$rc" = 0 ] || fail "building the patched $mod module failed"
    vm_say "guests load the patched $ko"
    export "$var=$ko"
}

# Builds (or reuses) the initramfs: busybox, the modules to reach the host
# root, and initramfs-init.sh as /init.  Prints its path.
vm_initramfs() {
    local out=$abs_top_builddir/tests/vm/initramfs-$VM_KVER.cpio
    local init=$_vm_libdir/initramfs-init.sh
    if [ -s "$out" ] && [ "$out" -nt "$init" ] && [ "$out" -nt /bin/busybox ] &&
        [ "$out" -nt "/lib/modules/$VM_KVER/modules.dep" ]; then
        echo "$out"; return 0
    fi
    local stage n=0 ko base
    mkdir -p "${out%/*}"
    stage=$(mktemp -d "${out%/*}/initramfs.XXXXXX")
    mkdir -p "$stage"/{bin,modules,proc,dev,sys}
    cp /bin/busybox "$stage/bin/busybox"
    ln -s busybox "$stage/bin/sh"
    cp "$init" "$stage/init"
    chmod 755 "$stage/init"
    # modprobe prints the insmod lines in load order, dependencies first.
    while read -r ko; do
        n=$((n + 1)); base=$(printf '%02d-%s' "$n" "${ko##*/}")
        case $ko in
            *.ko)     cp "$ko" "$stage/modules/$base" ;;
            *.ko.xz)  xz -dc "$ko" >"$stage/modules/${base%.xz}" ;;
            *.ko.zst) zstd -qdc "$ko" >"$stage/modules/${base%.zst}" ;;
            *.ko.gz)  gzip -dc "$ko" >"$stage/modules/${base%.gz}" ;;
            *) rm -rf "$stage"; fail "unknown module format: $ko" ;;
        esac || { rm -rf "$stage"; fail "cannot copy $ko"; }
    done < <(modprobe -S "$VM_KVER" --show-depends -a $VM_INITRAMFS_MODULES |
                 awk '$1 == "insmod" && !seen[$2]++ { print $2 }')
    [ "$n" -gt 0 ] || { rm -rf "$stage"; fail "found no modules for the initramfs"; }
    (cd "$stage" && find . | LC_ALL=C sort | busybox cpio -o -H newc 2>/dev/null) \
        >"$out.tmp.$$" || { rm -rf "$stage" "$out.tmp.$$"; fail "cpio failed"; }
    mv "$out.tmp.$$" "$out"
    rm -rf "$stage"
    echo "$out"
}

# Prints the image to boot: the kernel's uncompressed vmlinux (extracted once
# from the bzImage, booted through PVH: TCG takes seconds to decompress xz),
# or the bzImage itself when that is not possible or SMCR_VM_PVH=0.
vm_kernel_image() {
    local out=$abs_top_builddir/tests/vm/vmlinux-$VM_KVER magic off
    if [ "${SMCR_VM_PVH:-1}" = 0 ] ||
        ! grep -q '^CONFIG_PVH=y' "/boot/config-$VM_KVER" 2>/dev/null; then
        echo "$VM_KERNEL"; return 0
    fi
    if [ -s "$out" ] && [ "$out" -nt "$VM_KERNEL" ]; then
        echo "$out"; return 0
    fi
    for magic in '\xfd7zXZ\x00:xz -dc --single-stream' '\x28\xb5\x2f\xfd:zstd -dcq' \
                 '\x1f\x8b\x08:gzip -dc'; do
        off=$(LC_ALL=C grep -obUaP "${magic%%:*}" "$VM_KERNEL" 2>/dev/null | head -n 1 | cut -d: -f1)
        [ -n "$off" ] || continue
        tail -c +$((off + 1)) "$VM_KERNEL" | ${magic#*:} >"$out.tmp.$$" 2>/dev/null
        if [ "$(head -c 4 "$out.tmp.$$" | od -An -c | tr -d ' ')" = '177ELF' ]; then
            mv "$out.tmp.$$" "$out"
            echo "$out"; return 0
        fi
    done
    rm -f "$out.tmp.$$"
    echo "$VM_KERNEL"
}

# Prints N free UDP ports on 127.0.0.1.
_vm_udp_ports() {
    python3 - "$1" <<'EOF' 2>/dev/null ||
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
    { local i p=$(( 30000 + RANDOM % 20000 )); for (( i=0; i<$1; i++ )); do printf '%s ' $((p+i)); done; echo; }
}

_vm_workdir() {
    if [ -z "${_vm_work:-}" ]; then
        local t; t=$(basename "$0" .sh)
        _vm_work=${SMCR_VM_WORKDIR:-$abs_builddir/vm/$t.d}
        rm -rf "$_vm_work"
        # a first attempt drops the oopsed serial logs of an older run
        [ "${SMCR_VM_ATTEMPT:-1}" -ge 2 ] || rm -f "$_vm_work"-oops-*-serial.log
        mkdir -p "$_vm_work" || fail "cannot create $_vm_work"
        case $_vm_work in *[[:space:],]*) fail "work dir path must not contain blanks or commas: $_vm_work" ;; esac
        cleanup_fn _vm_cleanup
    fi
}

# SMCR_VM_BUSY=N: N CPU hogs beside the VMs from the first boot to the end
# (stress-ng's own --timeout bounds them should the cleanup never run).
_vm_busy() {
    [ -n "${SMCR_VM_BUSY:-}" ] && [ "$SMCR_VM_BUSY" != 0 ] && [ -z "${_vm_busy_pid:-}" ] || return 0
    command -v stress-ng >/dev/null || fail "SMCR_VM_BUSY needs stress-ng (scripts/install-deps.sh)"
    _vm_workdir
    stress-ng --cpu "$SMCR_VM_BUSY" --timeout "$((SMCR_VM_TIMEOUT + 60))s" \
        >"$_vm_work/stress-ng.log" 2>&1 &
    _vm_busy_pid=$!
    cleanup_fn "kill $_vm_busy_pid 2>/dev/null; wait $_vm_busy_pid 2>/dev/null"
    vm_say "busy host: stress-ng --cpu $SMCR_VM_BUSY beside the VMs (pid $_vm_busy_pid)"
}

# vm_start NAME IDX LINKS [SCRIPT [ARGS]] -- NICs come from _vm_nics_NAME
# (qemu arguments, set by vm_start_pair); boots in the background.  Call
# vm_wait_ready afterwards.
vm_start() {
    local name=$1 idx=$2 links=$3 script=${4:-} args=${5:-}
    _vm_busy
    [ -n "${VM_KVER:-}" ] || vm_requires
    _vm_workdir
    local initrd dir qmp cmdline
    initrd=$(vm_initramfs) || exit 1
    _vm_kmod rxe SMCR_VM_RXE VM_RXE_KO
    _vm_kmod nbd SMCR_VM_NBD VM_NBD_KO
    [ -n "${VM_BOOT_IMAGE:-}" ] || VM_BOOT_IMAGE=$(vm_kernel_image)
    dir=$_vm_work/$name
    mkdir -p "$dir/share"
    qmp=$dir/qmp.sock
    [ ${#qmp} -lt 100 ] || qmp=$(mktemp -u "/tmp/smcr-vm-$name.XXXXXX")
    _vm_dir[$name]=$dir _vm_idx[$name]=$idx _vm_links[$name]=$links _vm_sock[$name]=$qmp
    _vm_names+=("$name")
    # no_timer_check: a TCG guest starved by a busy host failed the
    # kernel's early IO-APIC timer check and panicked at boot ("IO-APIC +
    # timer doesn't work!", 6.12 with the host's load at 15)
    cmdline="console=ttyS0 quiet panic=-1 mitigations=off nokaslr 8250.nr_uarts=1 cryptomgr.notests no_timer_check"
    cmdline+=" smcr.init=$_vm_libdir/guest.sh smcr.name=$name smcr.idx=$idx"
    cmdline+=" smcr.links=$links smcr.share=$dir/share"
    [ -n "${VM_RXE_KO:-}" ] && cmdline+=" smcr.rxe=$VM_RXE_KO"
    [ -n "${VM_NBD_KO:-}" ] && cmdline+=" smcr.nbd=$VM_NBD_KO"
    [ -n "${abs_top_builddir:-}" ] && cmdline+=" smcr.build=$abs_top_builddir"
    case ${SMCR_VM_SUBNET:-per-link} in
        per-link) ;;
        one) cmdline+=" smcr.subnet=one" ;;
        *) fail "SMCR_VM_SUBNET: per-link or one, not '$SMCR_VM_SUBNET'" ;;
    esac
    [ -n "$script" ] && cmdline+=" smcr.script=$script smcr.args=$args"
    cmdline+=${SMCR_VM_APPEND:+ $SMCR_VM_APPEND}
    local -a nics
    local accel=${SMCR_VM_ACCEL:-tcg} cpu
    cpu=$(_vm_cpu)
    eval "nics=(\${_vm_nics_$name[@]+\"\${_vm_nics_$name[@]}\"})"
    (
        exec 0</dev/null
        timeout -k 5 "$SMCR_VM_TIMEOUT" qemu-system-x86_64 \
            -nodefaults -no-user-config -machine "pc,accel=$accel" -cpu "$cpu" \
            -smp 1 -m "$SMCR_VM_MEM" -display none -vga none -no-reboot \
            -kernel "$VM_BOOT_IMAGE" -initrd "$initrd" -append "$cmdline" \
            -serial "file:$dir/serial.log" \
            -qmp "unix:$qmp,server=on,wait=off" -pidfile "$dir/qemu.pid" \
            -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
            -virtfs "local,path=$dir/share,mount_tag=smcrshare,security_model=none,multidevs=remap" \
            "${nics[@]}" ${SMCR_VM_QEMU_ARGS:-} >"$dir/qemu.log" 2>&1
        rc=$?
        if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
            echo "watchdog: VM $name still running after ${SMCR_VM_TIMEOUT}s (SMCR_VM_TIMEOUT): killed it; serial log: $dir/serial.log" >&2
        fi
        echo "$rc" >"$dir/qemu.rc"
    ) &
    eval "_vm_wrapper_$name=$!"
}

# Waits until the guest agent of NAME is up (or fails with its logs).
vm_wait_ready() {
    local name=$1 dir=${_vm_dir[$1]} limit=${2:-120} i
    for (( i=0; i<limit*20; i++ )); do
        [ -e "$dir/share/ready" ] && { vm_say "$name up: $(head -n 1 "$dir/share/ready")"; return 0; }
        [ -e "$dir/share/fatal" ] && _vm_died "$name" "guest setup failed: $(cat "$dir/share/fatal")"
        [ -e "$dir/qemu.rc" ] && _vm_died "$name" "qemu exited ($(cat "$dir/qemu.rc")) before the guest was up"
        sleep 0.05
    done
    _vm_died "$name" "guest not up after ${limit}s"
}

_vm_died() {
    local name=$1; shift
    local dir=${_vm_dir[$name]}
    {
        echo "VM $name: $*"
        echo "--- qemu log $dir/qemu.log:"; tail -n 20 "$dir/qemu.log" 2>/dev/null
    } >&"$_vm_fd_err"
    fail "VM $name: $*"
}

# Link L of A and B: A's end on udp port pA, B's on pB.
_vm_plumb_pair() {
    local links=$1 l ports p
    read -r -a ports <<<"$(_vm_udp_ports $((2 * links)))"
    _vm_nics_A=() _vm_nics_B=()
    for (( l=1; l<=links; l++ )); do
        local pa=${ports[$((2*l-2))]} pb=${ports[$((2*l-1))]}
        _vm_nics_A+=(-netdev "dgram,id=link$l,local.type=inet,local.host=127.0.0.1,local.port=$pa,remote.type=inet,remote.host=127.0.0.1,remote.port=$pb"
                     -device "virtio-net-pci,netdev=link$l,mac=52:54:00:5c:01:0$l${_vm_nic_opts:+,$_vm_nic_opts}")
        _vm_nics_B+=(-netdev "dgram,id=link$l,local.type=inet,local.host=127.0.0.1,local.port=$pb,remote.type=inet,remote.host=127.0.0.1,remote.port=$pa"
                     -device "virtio-net-pci,netdev=link$l,mac=52:54:00:5c:02:0$l${_vm_nic_opts:+,$_vm_nic_opts}")
    done
}

vm_start_pair() {
    local links=${1:-2}
    vm_requires
    _vm_plumb_pair "$links"
    vm_say "booting A and B ($links links, kernel $VM_KVER, -cpu $(_vm_cpu))"
    vm_start A 1 "$links"
    vm_start B 2 "$links"
    vm_wait_ready A
    vm_wait_ready B
}

vm_start_single() {
    local links=${1:-0} l ports
    vm_requires
    _vm_nics_A=()
    if [ "$links" -gt 0 ]; then
        # Dead-end links: nobody listens on the remote ports.
        read -r -a ports <<<"$(_vm_udp_ports $((2 * links)))"
        for (( l=1; l<=links; l++ )); do
            _vm_nics_A+=(-netdev "dgram,id=link$l,local.type=inet,local.host=127.0.0.1,local.port=${ports[$((2*l-2))]},remote.type=inet,remote.host=127.0.0.1,remote.port=${ports[$((2*l-1))]}"
                         -device "virtio-net-pci,netdev=link$l,mac=52:54:00:5c:01:0$l${_vm_nic_opts:+,$_vm_nic_opts}")
        done
    fi
    vm_say "booting A ($links links, kernel $VM_KVER, -cpu $(_vm_cpu))"
    vm_start A 1 "$links"
    vm_wait_ready A
}

_vm_check() {
    [ -n "${_vm_dir[$1]:-}" ] || fail "no VM named '$1'"
}

vm_share() { _vm_check "$1"; echo "${_vm_dir[$1]}/share"; }
vm_log() { _vm_check "$1"; echo "${_vm_dir[$1]}/serial.log"; }
vm_ip() {
    _vm_check "$1"
    if [ "${SMCR_VM_SUBNET:-per-link}" = one ]; then
        echo "10.1.1.$(( 16 * ($2 - 1) + _vm_idx[$1] ))"
    else
        echo "10.1.$2.${_vm_idx[$1]}"
    fi
}

vm_ifup() {
    local dev=eth$(( $2 - 1 )) route=
    [ "${SMCR_VM_SUBNET:-per-link}" = one ] &&
        route=" && ip route replace 10.1.1.$(( 16 * ($2 - 1) ))/28 dev $dev src $(vm_ip "$1" "$2")"
    vm_run "$1" "ip link set $dev up$route"
}

vm_listening() {
    vm_run "$1" "for i in \$(seq 100); do ss -ltn | grep -q ':$2 ' && exit 0; sleep 0.1; done; exit 1" ||
        fail "no server listening on $1 port $2"
}

vm_dumpcap() {
    local share i
    share=$(vm_share "$1")
    vm_cap=$(vm_bg "$1" "exec dumpcap -q $2")
    for (( i=0; i<300; i++ )); do
        grep -q "Capturing on" "$share/out/$vm_cap.err" 2>/dev/null && return 0
        [ -e "$share/out/$vm_cap.rc" ] && { cat "$share/out/$vm_cap.err"; fail "dumpcap failed in $1"; }
        sleep 0.1
    done
    fail "dumpcap did not start in $1"
}

# vm_clock_offset NAME [N]: guest realtime minus host realtime, from the
# quickest of N (10) round trips; sets OFFSET and OFFSET_ERR (half that
# round trip).
vm_clock_offset() {
    local i t1 t2 tg best=
    for (( i=0; i<${2:-10}; i++ )); do
        t1=$EPOCHREALTIME
        tg=$(vm_run "$1" 'echo $EPOCHREALTIME') || return 1
        t2=$EPOCHREALTIME
        if [ -z "$best" ] || [ "$(echo "$t2 - $t1 < $best" | bc)" = 1 ]; then
            best=$(echo "$t2 - $t1" | bc)
            OFFSET=$(echo "$tg - ($t1 + $t2) / 2" | bc -l)
        fi
    done
    OFFSET_ERR=$(echo "$best * 500" | bc | sed 's/\..*//')
}

# vm_clock_offsets WHAT: off_a and off_b, A's and B's clock offsets
# (vm_clock_offset, 3 round trips each); fails naming WHAT.
vm_clock_offsets() {
    vm_clock_offset B 3 || fail "$1: cannot read B's clock"
    off_b=$OFFSET
    vm_clock_offset A 3 || fail "$1: cannot read A's clock"
    off_a=$OFFSET
}

vm_bg() {
    local name=$1; shift
    _vm_check "$name"
    local dir=${_vm_dir[$name]}/share id
    id=j${EPOCHREALTIME/./}$BASHPID$RANDOM
    local what="$*"
    what=${what%%$'\n'*}
    {
        echo "# vm_bg $name: ${what:0:120}"
        local v
        # libsmcr knobs from the host (SMCR_CALLER_POLL=1, SMCR_AUTOCORK_BYTES=0):
        # a VM test or bench run with them reaches every guest process
        for v in srcdir abs_srcdir abs_top_srcdir abs_top_builddir abs_builddir SMCR_VALGRIND \
                 SMCR_CALLER_POLL SMCR_AUTOCORK_BYTES; do
            [ -n "${!v:-}" ] && printf 'export %s=%q\n' "$v" "${!v}"
        done
        printf 'export SMCR_VM_NAME=%q\n' "$name"
        printf 'cd %q 2>/dev/null || cd /\n' "$PWD"
        echo "$*"
    } >"$dir/cmd/.$id.tmp"
    mv "$dir/cmd/.$id.tmp" "$dir/cmd/$id.sh"
    echo "$id"
}

vm_wait() {
    local limit=$SMCR_VM_CMD_TIMEOUT
    [ "$1" = -t ] && { limit=$(($2 * _vm_slow)); shift 2; }
    local name=$1 id=$2 i
    _vm_check "$name"
    local dir=${_vm_dir[$name]}
    for (( i=0; i<limit*50; i++ )); do
        [ -e "$dir/share/out/$id.rc" ] && break
        if [ -e "$dir/qemu.rc" ]; then
            _vm_died "$name" "VM ended while job $id ran ($(head -n 1 "$dir/share/run/$id.sh" 2>/dev/null))"
        fi
        sleep 0.02
    done
    [ -e "$dir/share/out/$id.rc" ] ||
        _vm_died "$name" "job $id did not finish within ${limit}s: $(sed -n '1s/^# //p' "$dir/share/run/$id.sh" 2>/dev/null)"
    cat "$dir/share/out/$id.out"
    cat "$dir/share/out/$id.err" >&2
    return "$(cat "$dir/share/out/$id.rc")"
}

# vm_out NAME JOB: the output of a job (running or done) so far.
vm_out() { cat "$(vm_share "$1")/out/$2.out" 2>/dev/null; }

# vm_wait_out NAME JOB PATTERN SECS [COUNT]: wait until the job has printed
# COUNT (default 1) lines matching the extended regex PATTERN; 1 if not.
vm_wait_out() {
    local i
    for (( i=0; i<$4*10; i++ )); do
        [ "$(vm_out "$1" "$2" | grep -cE "$3")" -ge "${5:-1}" ] && return 0
        sleep 0.1
    done
    return 1
}

vm_run() {
    local topt=()
    [ "$1" = -t ] && { topt=(-t "$2"); shift 2; }
    local name=$1 id; shift
    id=$(vm_bg "$name" "$@") || return 1
    vm_wait "${topt[@]}" "$name" "$id"
}

vm_qmp() {
    local name=$1 json=$2
    _vm_check "$name"
    python3 - "${_vm_sock[$name]}" "$json" <<'EOF'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
f = s.makefile("rw")
def reply():
    while True:
        m = json.loads(f.readline())
        if "event" not in m:
            return m
reply()  # greeting
f.write('{"execute": "qmp_capabilities"}\n'); f.flush()
reply()
f.write(sys.argv[2] + "\n"); f.flush()
r = reply()
if "error" in r:
    print(r["error"].get("desc", r), file=sys.stderr)
    sys.exit(1)
ret = r.get("return")
if isinstance(ret, str):
    print(ret, end="")
elif ret:
    print(json.dumps(ret))
EOF
}

# vm_pause NAME SECS: qemu stops the whole guest (its vCPUs and clock: the
# blackout of a live migration) for SECS, then lets it go on; prints the
# host times (s) of the stop and of the cont, as qemu replied.
vm_pause() {
    _vm_check "$1"
    python3 - "${_vm_sock[$1]}" "$2" <<'EOF'
import json, socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.settimeout(30)
s.connect(sys.argv[1])
f = s.makefile("rw")
def cmd(c):
    f.write(json.dumps({"execute": c}) + "\n"); f.flush()
    while True:
        m = json.loads(f.readline())
        if "event" not in m:
            if "error" in m:
                sys.exit("qmp %s: %s" % (c, m["error"]))
            return time.time()
f.readline()  # greeting
cmd("qmp_capabilities")
t0 = cmd("stop")
time.sleep(float(sys.argv[2]))
t1 = cmd("cont")
print("%.6f %.6f" % (t0, t1))
EOF
}

vm_hmp() {
    local cmd
    cmd=$(printf '%s' "$2" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')
    vm_qmp "$1" "{\"execute\": \"human-monitor-command\", \"arguments\": {\"command-line\": $cmd}}"
}

vm_link() {
    local name=$1 link=$2 state=$3 up
    case $state in on|up) up=true ;; off|down) up=false ;; *) fail "vm_link: on or off, not '$state'" ;; esac
    [ "$link" -ge 1 ] && [ "$link" -le "${_vm_links[$name]:-0}" ] ||
        fail "vm_link: VM $name has no link $link"
    vm_qmp "$name" "{\"execute\": \"set_link\", \"arguments\": {\"name\": \"link$link\", \"up\": $up}}" ||
        fail "vm_link $name $link $state failed"
}

vm_cable() {
    local n
    for n in "${_vm_names[@]}"; do
        [ "${_vm_links[$n]:-0}" -ge "$1" ] && vm_link "$n" "$1" "$2"
    done
    return 0
}

# Waits for a VM's qemu to end, up to SECS; kills it after that.
_vm_reap() {
    local name=$1 secs=$2 dir=${_vm_dir[$1]} i pid w
    for (( i=0; i<secs*20; i++ )); do
        [ -e "$dir/qemu.rc" ] && break
        sleep 0.05
    done
    if [ ! -e "$dir/qemu.rc" ]; then
        pid=$(cat "$dir/qemu.pid" 2>/dev/null)
        [ -n "$pid" ] && kill "$pid" 2>/dev/null
        for (( i=0; i<100; i++ )); do [ -e "$dir/qemu.rc" ] && break; sleep 0.05; done
        [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
    fi
    w=_vm_wrapper_$name
    [ -n "${!w:-}" ] && wait "${!w}" 2>/dev/null
    eval "_vm_wrapper_$name="
    [ "${_vm_sock[$name]}" = "$dir/qmp.sock" ] || rm -f "${_vm_sock[$name]}"
}

vm_stop() {
    local names=("$@") n
    [ ${#names[@]} -gt 0 ] || names=("${_vm_names[@]}")
    for n in "${names[@]}"; do
        _vm_check "$n"
        [ -e "${_vm_dir[$n]}/qemu.rc" ] || touch "${_vm_dir[$n]}/share/halt"
    done
    for n in "${names[@]}"; do
        _vm_reap "$n" 30
    done
    vm_say "stopped ${names[*]}"
}

# Powers VMs off at once through QMP (no shutdown in the guest: a kernel
# SMC client whose link group died can hang in D state) and waits for qemu.
vm_quit() {
    local n
    for n in "$@"; do
        _vm_check "$n"
        [ -e "${_vm_dir[$n]}/qemu.rc" ] || vm_qmp "$n" '{"execute": "quit"}' >/dev/null 2>&1
    done
    for n in "$@"; do _vm_reap "$n" 10; done
    vm_say "powered off $*"
}

# _vm_serial_tail NAME: the end of the VM's serial log, or, when its kernel
# oopsed or panicked, the whole report from its first line (the next run
# of the test overwrites the log; the report in the test's log stays).
_vm_serial_tail() {
    local log=${_vm_dir[$1]}/serial.log first
    first=$(grep -n -m 1 -E 'BUG: |Oops|double fault|general protection fault|Kernel panic' \
        "$log" 2>/dev/null | cut -d: -f1)
    if [ -n "$first" ]; then
        echo "--- VM $1: its kernel oopsed; serial log $log from line $first:"
        tail -n "+$first" "$log" | head -n 120
    else
        echo "--- VM $1 serial log $log (tail):"
        tail -n 25 "$log" 2>/dev/null
    fi
}

# _vm_rxe_oops NAME: when the VM's kernel oopsed or panicked in rdma_rxe
# (a frame, the RIP or the workqueue of its report, the 80 lines from the
# first oops line, is rdma_rxe's: "[rdma_rxe]", "Workqueue: rxe_wq",
# "RIP: 0010:rxe_..."), print the report's first 12 lines; else fail.
_vm_rxe_oops() {
    local log=${_vm_dir[$1]}/serial.log first rep
    first=$(grep -n -m 1 -E 'BUG: |Oops|double fault|general protection fault|Kernel panic' \
        "$log" 2>/dev/null | cut -d: -f1)
    [ -n "$first" ] || return 1
    rep=$(tail -n "+$first" "$log" | head -n 80)
    echo "$rep" | grep -qE '\[rdma_rxe\]|Workqueue: rxe_wq|RIP: [0-9a-f]+:rxe_' || return 1
    echo "$rep" | head -n 12
}

# At exit (functions.sh's cleanup runner; its "rc" is the test's status):
# kill what still runs and show the serial logs when the test failed.  A
# failed test whose guest oopsed in rdma_rxe also writes that oops's first
# lines to $SMCR_VM_OOPS_FILE: tests/run-test then runs it once more.
_vm_cleanup() {
    local n status=${rc:-0} oops
    for n in "${_vm_names[@]}"; do
        [ -e "${_vm_dir[$n]}/qemu.rc" ] && continue
        touch "${_vm_dir[$n]}/share/halt"
        _vm_reap "$n" 5
    done
    if [ "$status" != 0 ] && [ "$status" != 77 ]; then
        for n in "${_vm_names[@]}"; do
            _vm_serial_tail "$n"
            oops=$(_vm_rxe_oops "$n") || continue
            # a rerun empties the work dir: this serial log stays beside it
            cp "${_vm_dir[$n]}/serial.log" "$_vm_work-oops-$n-serial.log" 2>/dev/null
            echo "--- VM $n: the oops is in rdma_rxe (kernel ${VM_KVER:-?}): a kernel bug in the emulated NIC; its serial log also in $_vm_work-oops-$n-serial.log"
            [ -z "${SMCR_VM_OOPS_FILE:-}" ] ||
                { echo "VM $n (kernel ${VM_KVER:-?}), serial log $_vm_work-oops-$n-serial.log:"; echo "$oops"; } \
                    >>"$SMCR_VM_OOPS_FILE"
        done
        echo "--- work dir (guest jobs in */share/out): $_vm_work"
    fi >&"$_vm_fd_out" 2>&"$_vm_fd_err"
}

# ---- failover tests: smcr-stream's --ticks files ---------------------------------

# tf TICKS N: field N of the last complete tick line (2 time, 3 bytes_recv,
# 4 bytes_sent, 5 failovers, 6 link_failures, 7 links_added, 8 links_active,
# 9 rebalanced).  (One fork: the host has two cores for two TCG guests.)
tf() {
    local l f=() v=0
    while IFS= read -r l; do
        read -r -a f <<<"$l"
        [ "${#f[@]}" = 9 ] && v=${f[$(($2 - 1))]}
    done < <(tail -n 2 "$1" 2>/dev/null)
    echo "$v"
}

# until_ok SECS CMD: poll CMD every 0.2 s.
until_ok() {
    local secs=$1 i; shift
    for (( i=0; i<secs*5; i++ )); do
        eval "$*" && return 0
        sleep 0.2
    done
    return 1
}

# ---- the kernel peer (SMCR_VM_RXE=smc, see README.md) -------------------------

# kpeer_requires: tshark, dumpcap, the VM lane and the kernel's smc module;
# sets S (smcr-stream) and N (smc-nl).
kpeer_requires() {
    requires tshark --version
    requires dumpcap --version
    vm_requires
    S=$abs_top_builddir/tests/bench/smcr-stream
    N=$abs_top_builddir/tests/bench/smc-nl
    local p
    for p in "$S" "$N"; do [ -x "$p" ] || fail "$p not built"; done
    modprobe -S "$VM_KVER" -n smc >/dev/null 2>&1 || skip "kernel $VM_KVER has no module smc"
}

# kpeer_setup VM...: AF_SMC in each VM with PNET ID SMCRBD for eth0/rxe0
# (with SMCR_VM_SUBNET=one: every ethN/rxeN, the kernel's second links) and
# the user EID SMCRBD.KPEER.
kpeer_setup() {
    local v l pnet nl
    for v in "$@"; do
        pnet= nl=1
        [ "${SMCR_VM_SUBNET:-per-link}" = one ] && nl=${_vm_links[$v]:-1}
        for (( l=0; l<nl; l++ )); do
            pnet+=" && $N pnet-add SMCRBD eth$l rxe$l 1"
        done
        vm_run "$v" "modprobe smc$pnet && $N ueid-add SMCRBD.KPEER" ||
            fail "AF_SMC setup failed on $v"
    done
}

# kstats VM: the kernel's SMC-R successes and fallbacks by reason (smc-nl).
kstats() { vm_run "$1" "$N stats; $N fallbacks"; }
# kget STATS KEY: one counter of kstats' output ("fallback client
# 0x03030000 2" is key "fallback client 0x03030000").
kget() {
    echo "$1" | awk -v k="$2" '{ v = $NF; $NF = ""; sub(/ $/, "") } $0 == k { s = v } END { print s + 0 }'
}
