#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# rxe lane smoke 2 (single VM): the kernel's nbd-client attaches /dev/nbd0
# to an nbdkit memory export inside the guest; a pattern written through the
# block device with O_DIRECT must read back identical after dropping caches.
# smcr-timeout: 180
: "${SMCR_VM_TIMEOUT:=120}"
. "$(dirname "$0")/lib.sh"
vm_requires
requires nbdkit --version
requires test -x /usr/sbin/nbd-client

vm_start_single
out=$(vm_run A '
set -eu
mib=8 off=8            # write 8 MiB at offset 8 MiB of a 64 MiB export
modprobe nbd
nbdkit --exit-with-parent --ip-addr 127.0.0.1 --port 10809 --pidfile /tmp/nbdkit.pid memory 64M &
for i in $(seq 100); do [ -s /tmp/nbdkit.pid ] && break; sleep 0.1; done
nbd-client -N "" -b 4096 127.0.0.1 10809 /dev/nbd0 >/dev/null
trap "nbd-client -d /dev/nbd0 >/dev/null 2>&1 || true" EXIT
size=$(blockdev --getsize64 /dev/nbd0)
[ "$size" = 67108864 ] || { echo "FAIL: /dev/nbd0 has $size bytes, expected 64 MiB"; exit 1; }
head -c ${mib}M /dev/urandom >/tmp/pattern
want=$(sha256sum </tmp/pattern)
dd if=/tmp/pattern of=/dev/nbd0 bs=1M seek=$off count=$mib oflag=direct conv=fsync status=none
blockdev --flushbufs /dev/nbd0
echo 3 >/proc/sys/vm/drop_caches
got=$(dd if=/dev/nbd0 bs=1M skip=$off count=$mib iflag=direct status=none | sha256sum)
[ "$got" = "$want" ] || { echo "FAIL: read back sha256 $got, wrote $want"; exit 1; }
zero=$(dd if=/dev/nbd0 bs=1M count=$off iflag=direct status=none | tr -d "\0" | wc -c)
[ "$zero" = 0 ] || { echo "FAIL: $zero non-zero bytes before the written range"; exit 1; }
nbd-client -d /dev/nbd0 >/dev/null
trap - EXIT
echo "nbd: verified $((mib << 20)) bytes written and read back through /dev/nbd0 (sha256 ${want%% *}), $((off << 20)) bytes untouched"
') || { echo "$out"; fail "nbd check failed in the guest"; }
echo "$out"
echo "$out" | grepq '^nbd: verified 8388608 bytes' || fail "no verified line"
vm_stop
echo "PASS: kernel nbd-client over nbdkit memory in the VM: 8388608 bytes verified"
