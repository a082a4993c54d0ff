#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs every build and test dependency of smcrbd from Debian 12's
# packages.  Idempotent and non-interactive; needs root (or sudo).
set -euo pipefail

PACKAGES=(
    # build
    build-essential autoconf automake libtool pkg-config
    libibverbs-dev liburing-dev nbdkit-plugin-dev libfuse3-dev
    libcunit1-dev libssl-dev libjson-c-dev libgnutls28-dev clang
    # the SMC TCP option on SYNs: a BPF program (smcr/synopt.bpf.c)
    libbpf-dev bpftool
    # RDMA userspace (verbs providers incl. rxe, tools, benchmarks)
    rdma-core ibverbs-utils ibverbs-providers perftest rdmacm-utils
    # NBD clients and peers used by the tests
    nbdkit nbd-client libnbd-bin python3-libnbd qemu-utils qemu-block-extra fio fuse3
    # protocol checks, memory checks
    tshark valgrind
    # stacks of a hung program in a test (backtraces in tests/functions.sh)
    gdb
    # the Debian packages (tests/test-deb.sh: dpkg-buildpackage, lintian)
    debhelper lintian
    # smcrd's units and socket activation (systemd.pc, systemd-socket-activate)
    systemd
    # TLS tests: certificates and PSK files (certtool, psktool)
    gnutls-bin
    # benchmark and soak reports (plots); profiles in the guests (perf,
    # bench-smcr-vm.sh --profile)
    gnuplot-nox linux-perf
    # the rxe VM lane: a stock Debian kernel under qemu, busybox initramfs
    qemu-system-x86 linux-image-amd64 busybox-static kmod iproute2
    e2fsprogs xxd python3 procps psmisc
    # the lane on a busy host (SMCR_VM_BUSY: a CPU hog beside the VMs)
    stress-ng
    # the kernel peer (tests/vm/kernel-smc.sh): rdma_rxe rebuilt with two
    # upstream fixes from the kernel's source, against the guest kernel's
    # headers (linux-headers-amd64 matches linux-image-amd64)
    linux-source-6.1 linux-headers-amd64 patch xz-utils
    # the lane's second kernel (SMCR_VM_KERNEL=6.12, tests/vm/README.md):
    # Debian 12's 6.12 from bookworm-security, beside 6.1 (the default),
    # with its headers (linux-headers-6.12-amd64 depends on the headers of
    # the version linux-image-6.12-amd64 depends on) and its source (RNBD/RTRS,
    # nbd.ko for AF_SMC; 6.12's stock rdma_rxe needs no patch)
    linux-image-6.12-amd64 linux-headers-6.12-amd64 linux-source-6.12
    # the RDMA block peers (tests/vm/rdma-peers.sh): NVMe-oF/RDMA's host tool;
    # RNBD/RTRS are built from linux-source-6.1 (linux-source-6.12 for 6.12)
    nvme-cli
    # smcrd's RBD exports (librbd) and test-rbd.sh's single-node Ceph
    # (one mon, one memstore osd; no mgr)
    librbd-dev ceph-mon ceph-osd ceph-common
)

missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed' ||
        missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#PACKAGES[@]} packages present"
    exit 0
fi

SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
echo "install-deps: installing ${missing[*]}"
# tshark asks whether non-root users may capture; answer no.
echo "wireshark-common wireshark-common/install-setuid boolean false" |
    $SUDO debconf-set-selections
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "install-deps: done"
