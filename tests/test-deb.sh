#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# The Debian packages of debian/: "make distdir" of this tree into a scratch
# directory, dpkg-buildpackage -us -uc -b there (nocheck: the unit tests ran
# in make check), then, with nothing installed on the system, the .debs
# unpacked with dpkg-deb -x into one tree:
#  - the five packages are there, no .la, /etc/smcrd.conf a conffile, the
#    units, libsmcr0's symbols file with LIBSMCR_0.1 and 0.2;
#  - smcrd, smcrctl, smcr-fuse, smcr-attach and the nbdkit plugin need
#    libsmcr.so.0 (readelf -d), have no RPATH/RUNPATH, load the unpacked
#    libsmcr (LD_LIBRARY_PATH, as ldconfig's cache would find it) and the
#    programs answer --help;
#  - the quick start on the unpacked files: smcrd with one export, the
#    plugin under nbdkit --run sees its size (nbdkit present);
#  - lintian on the .changes: no error (lintian present; SMCR_DEB_LINTIAN=0
#    skips it);
#  - installed for real: tests/vm/deb-install.sh boots one guest of the rxe
#    lane, apt-get installs the .debs there, runs README's quick start on
#    the installed files and purges them (qemu and a guest kernel present;
#    SMCR_DEB_GUEST=0 skips it; about 100 s more).
# A package build compiles the whole tree: about 4-6 minutes on 2 busy
# cores, so make check runs it only with SMCR_DEB_TEST=1 (scripts/check.sh
# sets it in its own step); skips where dpkg-buildpackage, debhelper or a
# Build-Depends is absent.
# smcr-timeout: 1200
. "${srcdir:-.}/functions.sh"

[ "${SMCR_DEB_TEST:-0}" = 1 ] ||
    skip "a package build takes minutes: make check TESTS=test-deb.sh SMCR_DEB_TEST=1"
requires dpkg-buildpackage --version
requires dpkg-deb --version
requires command -v dh_autoreconf
requires readelf --version
[ -f "$abs_top_srcdir/debian/control" ] || fail "no debian/control in $abs_top_srcdir"

d=$(scratch_dir)
src=$d/build/smcrbd
mkdir -p "$d/build"
# (automake's distdir is relative: its subdirectories prefix ../)
rel=$(realpath --relative-to="$abs_top_builddir" "$src")
env -u MAKEFLAGS -u MFLAGS make -s -C "$abs_top_builddir" distdir distdir="$rel" \
    >"$d/distdir.log" 2>&1 || { tail -n 30 "$d/distdir.log"; fail "make distdir"; }
[ -x "$src/debian/rules" ] || fail "debian/ is not in the distribution (EXTRA_DIST)"
cd "$src" || fail "cd $src"
missing=$(dpkg-checkbuilddeps -P nocheck 2>&1) ||
    skip "Build-Depends not installed: ${missing#*: }"

start=$SECONDS
env -u MAKEFLAGS -u MFLAGS DEB_BUILD_OPTIONS="nocheck parallel=2" \
    dpkg-buildpackage -us -uc -b -Pnocheck >"$d/build.log" 2>&1 ||
    { tail -n 60 "$d/build.log"; fail "dpkg-buildpackage -us -uc -b failed"; }
echo "dpkg-buildpackage -us -uc -b: $((SECONDS - start)) s"
grep -E 'dh_missing|warning' "$d/build.log" | grep -v -e '^libtool' -e 'warning: ignoring' | head -n 20

arch=$(dpkg-architecture -qDEB_HOST_ARCH)
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
root=$d/root
for p in libsmcr0 libsmcr-dev smcrd smcrbd-clients nbdkit-plugin-smcr; do
    deb=$(ls "$d/build/${p}_"*"_$arch.deb" 2>/dev/null | head -n 1)
    [ -n "$deb" ] || fail "no $p package built ($(ls "$d/build"))"
    dpkg-deb -x "$deb" "$root" || fail "dpkg-deb -x $deb"
    dpkg-deb -e "$deb" "$d/ctrl-$p" || fail "dpkg-deb -e $deb"
    echo "$p: $(dpkg-deb -f "$deb" Depends)"
done

# --- the files ----------------------------------------------------------------
la=$(find "$root" -name '*.la')
[ -z "$la" ] || fail "libtool archives packaged: ${la//$root/}"
grep -qx /etc/smcrd.conf "$d/ctrl-smcrd/conffiles" || fail "/etc/smcrd.conf is not a conffile of smcrd"
for f in etc/smcrd.conf lib/systemd/system/smcrd.service lib/systemd/system/smcrd.socket \
         lib/systemd/system/smcr-attach-ublk@.service lib/systemd/system/smcr-attach-ublk-standby@.service \
         usr/include/smcr.h "usr/lib/$triplet/pkgconfig/libsmcr.pc" \
         usr/share/man/man8/smcrd.8.gz usr/share/man/man5/smcrd.conf.5.gz usr/share/man/man3/libsmcr.3.gz \
         usr/share/man/man1/nbdkit-smcr-plugin.1.gz usr/share/man/man1/smcr-fuse.1.gz \
         usr/share/bash-completion/completions/smcrd usr/share/bash-completion/completions/smcrctl \
         usr/share/bash-completion/completions/smcr-attach usr/share/bash-completion/completions/smcr-fuse; do
    [ -e "$root/$f" ] || fail "/$f is not in the packages"
done
grep -q '^ExecStart=/usr/sbin/smcrd .*--config /etc/smcrd.conf' "$root/lib/systemd/system/smcrd.service" ||
    fail "smcrd.service does not run /usr/sbin/smcrd with /etc/smcrd.conf"
grep -q '^EnvironmentFile=/etc/smcr-attach/ublk%i.conf$' "$root/lib/systemd/system/smcr-attach-ublk@.service" ||
    fail "smcr-attach-ublk@.service does not read /etc/smcr-attach/ublk%i.conf"
grep -q '^ExecStart=/usr/sbin/smcr-attach --ublk=%i --recover=auto ' "$root/lib/systemd/system/smcr-attach-ublk@.service" ||
    fail "smcr-attach-ublk@.service does not run /usr/sbin/smcr-attach --ublk=%i --recover=auto"
sym=$d/ctrl-libsmcr0/symbols
[ -f "$sym" ] || fail "libsmcr0 has no symbols file"
grep -q 'smcr_connect@LIBSMCR_0.1\|(symver)LIBSMCR_0.1' "$sym" &&
    grep -q 'LIBSMCR_0.2' "$sym" || fail "libsmcr0's symbols file lacks a version node: $(cat "$sym")"
so=$(ls "$root/usr/lib/$triplet"/libsmcr.so.[0-9] 2>/dev/null | head -n 1)
[ -n "$so" ] || fail "no libsmcr.so.N in /usr/lib/$triplet"
soname=${so##*/}
export LD_LIBRARY_PATH=$root/usr/lib/$triplet

# --- the programs link the one libsmcr -------------------------------------------
plugin=$(find "$root" -name nbdkit-smcr-plugin.so | head -n 1)
[ -n "$plugin" ] || fail "no nbdkit-smcr-plugin.so packaged"
for f in "$root/usr/sbin/smcrd" "$root/usr/bin/smcrctl" "$root/usr/bin/smcr-fuse" \
         "$root/usr/sbin/smcr-attach" "$plugin"; do
    p=${f#"$root"}
    [ -f "$f" ] || fail "$p is not in the packages"
    readelf -d "$f" | grepq "NEEDED.*\\[$soname\\]" || fail "$p does not need $soname"
    readelf -d "$f" | grepq 'RPATH\|RUNPATH' && fail "$p has an RPATH/RUNPATH: $(readelf -d "$f" | grep PATH)"
    ldd "$f" | grep 'libsmcr\.so' | grepq "$root" || fail "$p does not load the unpacked libsmcr"
    case $f in
    *.so) ;;
    *) timeout 20 "$f" --help >"$d/help" 2>&1 || fail "$p --help: exit $? ($(head -n 3 "$d/help"))"
       grepq -i usage "$d/help" || fail "$p --help: $(head -n 3 "$d/help")" ;;
    esac
done
echo "smcrd, smcrctl, smcr-fuse, smcr-attach, the plugin: need $soname, no RUNPATH, --help answered"

# --- the quick start on the unpacked files ------------------------------------------
if nbdkit --version >/dev/null 2>&1 && nbdinfo --version >/dev/null 2>&1; then
    export SMCR_CTL_DIR=$d/ctl
    truncate -s 64M "$d/disk.img"
    port=$(free_port)
    "$root/usr/sbin/smcrd" -f -l 127.0.0.1 -p "$port" --export disk="$d/disk.img" 2>"$d/smcrd.log" &
    pid=$!
    cleanup_fn "kill -KILL $pid 2>/dev/null"
    wait_for 10 nbdinfo --size "nbd://127.0.0.1:$port/disk"
    out=$(nbdkit -U - "$plugin" server="127.0.0.1:$port" export=disk transport=tcp \
          --run 'nbdinfo --size "$uri"') || fail "nbdkit (unpacked plugin) --run failed"
    [ "$out" = 67108864 ] || fail "nbdkit smcr: size $out"
    kill -TERM "$pid"; wait "$pid" || fail "smcrd exited $?"
    echo "quick start on the unpacked files: nbdkit smcr sees the 64 MiB export of smcrd"
else
    echo "note: no nbdkit/nbdinfo here: the quick start on the unpacked files not run"
fi

# --- lintian --------------------------------------------------------------------------
if [ "${SMCR_DEB_LINTIAN:-1}" != 0 ] && lintian --version >/dev/null 2>&1; then
    changes=$(ls "$d/build/"*.changes | head -n 1)
    lintian --allow-root --no-tag-display-limit "$changes" >"$d/lintian.log" 2>&1
    cat "$d/lintian.log"
    grepq '^E: ' "$d/lintian.log" && fail "lintian reports errors"
    echo "lintian: $(grep -c '^W: ' "$d/lintian.log") warnings, no error"
else
    echo "note: lintian not run (absent or SMCR_DEB_LINTIAN=0)"
fi
# --- installed in a guest -------------------------------------------------------------
guest="not installed in a guest"
if [ "${SMCR_DEB_GUEST:-1}" != 0 ]; then
    rc=0
    bash "$srcdir/vm/deb-install.sh" "$d/build" || rc=$?
    case $rc in
    0) guest="apt-get installed, used and purged in a guest" ;;
    77) echo "note: the guest install not run (the reason above)" ;;
    *) fail "the packages installed in a guest (tests/vm/deb-install.sh): exit $rc" ;;
    esac
fi
echo "PASS: dpkg-buildpackage built 5 packages; their programs link $soname; $guest"
