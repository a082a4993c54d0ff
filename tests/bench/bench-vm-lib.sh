# SPDX-License-Identifier: BSD-3-Clause
# Shared by the lane benchmarks (bench-*-vm.sh), sourced by them.

# bench_need FILE...: each one built, or exit 1 naming it.
bench_need() {
    local p
    for p; do
        [ -e "$p" ] || { echo "bench: $p not built" >&2; exit 1; }
    done
}

# bench_need_cmd CMD...: each one on PATH, or exit 1 naming it.
bench_need_cmd() {
    local c
    for c; do
        command -v "$c" >/dev/null || { echo "bench: $c not found" >&2; exit 1; }
    done
}

# bench_ublk_stop: after tests/vm/lib.sh, SIGTERM to guest A's
# smcr-attach --ublk (it removes its device), its exit awaited (30 s).
bench_ublk_stop() {
    vm_run A "kill -TERM \$(pidof smcr-attach); for i in \$(seq 300); do pidof smcr-attach >/dev/null || exit 0; sleep 0.1; done" >/dev/null
}

# bench_vm_lock: the VM lock (SMCR_VM_LOCK, default /tmp/smcrbd-vm.lock;
# empty: none) held on fd 9 until the benchmark exits.
bench_vm_lock() {
    local lock=${SMCR_VM_LOCK-/tmp/smcrbd-vm.lock}
    if [ -n "$lock" ] && command -v flock >/dev/null; then
        exec 9>"$lock"
        echo "bench: waiting for the VM lock $lock" >&2
        flock 9
    fi
}

# bench_peers_requires: after tests/vm/lib.sh and rdma-peers.sh, the lane
# and the RDMA block peers named in $systems (rnbd left out, with a line,
# when its modules cannot be built).
bench_peers_requires() {
    vm_requires
    case " $systems " in *" nvmeof "*) nvmeof_requires ;; esac
    case " $systems " in
        *" rnbd "*) rnbd_requires || { echo "bench: no RNBD/RTRS modules: rnbd left out"; systems=${systems/rnbd/}; } ;;
    esac
}
