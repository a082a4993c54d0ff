#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The Debian packages installed as a user installs them, in one guest of
# the rxe lane (its root is the host's, under a tmpfs overlay that is gone
# at the end, so the host itself is not touched):
#  - apt-get install ./*.deb of the five packages in DEBDIR (the guest has no
#    network: their dependencies are the host's packages), dpkg calls them
#    installed;
#  - smcrd, smcrctl and smcr-fuse from PATH are the packaged ones and load
#    the packaged libsmcr.so.0 through ldconfig's cache;
#  - README's quick start, literally: smcrd with one export, nbdinfo,
#    nbdcopy of an image into it, `nbdkit smcr` (the plugin found by name
#    in nbdkit's plugin directory) copying it out again, checksums equal;
#    smcrctl sees the daemon;
#  - dpkg --purge leaves none of the packages' files.
# Run by tests/test-deb.sh with the directory of the .debs it built:
#   bash tests/vm/deb-install.sh DEBDIR
# 96 s in the guest (apt-get install 62 s, dpkg --purge 16 s) in a fresh-clone
# .ci/run on 2 busy cores (6.1, 2 Dec 2026, 30840e5); test-deb.sh in all 204 s.
: "${SMCR_VM_TIMEOUT:=400}"
. "$(dirname "$0")/lib.sh"
debdir=${1:?usage: deb-install.sh DEBDIR}
debdir=$(cd "$debdir" && pwd) || fail "no directory $1"
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
pkgs="libsmcr0 libsmcr-dev smcrd smcrbd-clients nbdkit-plugin-smcr"
debs=()
for p in $pkgs; do
    f=$(ls "$debdir/${p}_"*"_$arch.deb" 2>/dev/null | head -n 1)
    [ -n "$f" ] || fail "no $p package in $debdir"
    debs+=("./${f##*/}")
done
vm_requires
requires nbdkit --version
requires nbdinfo --version
requires nbdcopy --version
vm_start_single 0

out=$(vm_run -t 300 A "
set -eu
# The guest's jobs find the build tree's libsmcr first: not here.
unset LD_LIBRARY_PATH
export DEBIAN_FRONTEND=noninteractive
# man-db's trigger re-indexes every manual page: minutes under TCG.
rm -f /var/lib/man-db/auto-update
log=$(vm_share A)/apt.log
cd $debdir
apt-get install -y -o Dpkg::Use-Pty=0 ${debs[*]} >\$log 2>&1 ||
    { tail -n 30 \$log; echo 'FAIL: apt-get install ./*.deb'; exit 1; }
for p in $pkgs; do
    st=\$(dpkg-query -W -f '\${Status}' \$p)
    [ \"\$st\" = 'install ok installed' ] || { echo \"FAIL: \$p: \$st\"; exit 1; }
done
echo "apt-get install: 5 packages installed in \$SECONDS s"
for prog in smcrd smcrctl smcr-fuse smcr-attach; do
    path=\$(command -v \$prog)
    case \$path in /usr/bin/*|/usr/sbin/*) ;; *) echo \"FAIL: \$prog is \$path\"; exit 1 ;; esac
    lib=\$(ldd \$path | sed -n 's|.*libsmcr\\.so\\.0 => \\([^ ]*\\).*|\\1|p')
    case \$lib in /lib/*|/usr/lib/*) ;; *) echo \"FAIL: \$path loads libsmcr from '\$lib'\"; exit 1 ;; esac
done
echo \"programs: /usr/sbin/smcrd and the clients load \$lib\"

# README's quick start, in an empty directory.
mkdir /tmp/qs && cd /tmp/qs
export SMCR_CTL_DIR=/tmp/qs-ctl
truncate -s 64M disk.img
smcrd -f -l 127.0.0.1 -p 10809 --export disk=\$PWD/disk.img 2>smcrd.log &
srv=\$!
for i in \$(seq 100); do nbdinfo --size nbd://127.0.0.1/disk >/dev/null 2>&1 && break; sleep 0.2; done
nbdinfo nbd://127.0.0.1/disk >info.txt || { cat smcrd.log; echo 'FAIL: nbdinfo'; exit 1; }
grep -q 'export-size: 67108864' info.txt || { cat info.txt; echo 'FAIL: nbdinfo size'; exit 1; }
head -c 16M /dev/urandom >some.img
nbdcopy some.img nbd://127.0.0.1/disk
nbdkit -U - smcr server=127.0.0.1 export=disk transport=tcp \
    --run 'nbdinfo --size \"\$uri\" >plugin-size.txt && nbdcopy \"\$uri\" back.img' ||
    { cat smcrd.log; echo 'FAIL: nbdkit smcr --run'; exit 1; }
[ \"\$(cat plugin-size.txt)\" = 67108864 ] || { echo \"FAIL: nbdkit smcr: size \$(cat plugin-size.txt)\"; exit 1; }
want=\$(sha256sum <some.img) got=\$(head -c 16M back.img | sha256sum)
[ \"\$want\" = \"\$got\" ] || { echo 'FAIL: the image read back through nbdkit smcr differs'; exit 1; }
echo 'quick start: 16 MiB written with nbdcopy, read back through nbdkit smcr (plugin by name), sha256 equal'
smcrctl status smcrd >status.txt || { cat status.txt; echo 'FAIL: smcrctl status'; exit 1; }
grep -q \"^=== smcrd (pid \$srv) ===\" status.txt || { cat status.txt; echo 'FAIL: smcrctl status does not show smcrd'; exit 1; }
kill -TERM \$srv; wait \$srv || { cat smcrd.log; echo \"FAIL: smcrd exited \$?\"; exit 1; }
echo 'smcrctl status answered; smcrd exited 0 on SIGTERM'

# (dpkg itself: apt-get would read the package lists again, a minute under TCG)
t=\$SECONDS
dpkg --purge $pkgs >>\$log 2>&1 ||
    { tail -n 20 \$log; echo 'FAIL: dpkg --purge'; exit 1; }
for f in /usr/sbin/smcrd /usr/bin/smcrctl /usr/bin/smcr-fuse /usr/sbin/smcr-attach /etc/smcrd.conf; do
    [ ! -e \$f ] || { echo \"FAIL: \$f left after dpkg --purge\"; exit 1; }
done
ldconfig -p | grep -q libsmcr && { echo 'FAIL: libsmcr still in ldconfig cache'; exit 1; }
echo \"dpkg --purge: the programs, the library and /etc/smcrd.conf are gone (\$((SECONDS - t)) s)\"
") || { echo "$out"; fail "the packages in the guest"; }
echo "$out"
vm_stop
echo "PASS: apt-get install ./*.deb in a guest, README's quick start on the installed files, purged clean"
