#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# 8 clients at once, each writing and reading back its own region with
# many requests in flight; checksums verified through NBD and on the file.
# smcr-timeout: 300
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"
requires_nbd_python
requires sha256sum --version

d=$(scratch_dir)
region=$(scale_mib 16 2)
truncate -s $(( region * 8 ))M "$d/disk.img"
start_smcrd --threads 2 --export "disk=$d/disk.img"

pids=()
for i in 0 1 2 3 4 5 6 7; do
    nbd_python "$(uri disk)" "$i" "$region" >"$d/client$i.out" 2>&1 <<'PY' &
import hashlib, os, sys, nbd
uri, idx, mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
base, size, chunk = idx * mib << 20, mib << 20, 256 << 10
data = os.urandom(size)
h = nbd.NBD()
h.connect_uri(uri)
cookies = [h.aio_pwrite(data[o:o + chunk], base + o) for o in range(0, size, chunk)]
while h.aio_in_flight() > 0:
    h.poll(-1)
for c in cookies:
    assert h.aio_command_completed(c)
h.flush()
bufs = [nbd.Buffer(chunk) for _ in range(0, size, chunk)]
cookies = [h.aio_pread(b, base + i * chunk) for i, b in enumerate(bufs)]
while h.aio_in_flight() > 0:
    h.poll(-1)
for c in cookies:
    assert h.aio_command_completed(c)
back = b"".join(b.to_bytearray() for b in bufs)
want = hashlib.sha256(data).hexdigest()
got = hashlib.sha256(back).hexdigest()
h.shutdown()
print(want, got)
sys.exit(0 if want == got else 1)
PY
    pids+=($!)
done
rc=0
for i in 0 1 2 3 4 5 6 7; do
    wait "${pids[$i]}" || { rc=1; echo "client $i failed:"; cat "$d/client$i.out"; }
done
[ $rc = 0 ] || fail "some clients failed"
for i in 0 1 2 3 4 5 6 7; do
    read -r want got <"$d/client$i.out"
    ondisk=$(dd if="$d/disk.img" bs=1M skip=$(( i * region )) count="$region" status=none | sha256sum | cut -d' ' -f1)
    [ "$ondisk" = "$want" ] || fail "client $i: region on disk differs"
done
stop_smcrd
[ "$(grep -c "export 'disk' (" "$SMCRD_LOG")" -ge 8 ] || fail "fewer than 8 connections logged"
echo "PASS: 8 clients, own regions, checksums match (NBD and file)"
