#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# libsmcr as installed: "make install DESTDIR=" of smcr/, then the client of
# libsmcr(3)'s EXAMPLES (cut from the page) and an echo server are built
# with only "pkg-config --cflags --libs libsmcr" of that tree and talk to
# each other over loopback (TCP fallback here: no RDMA); the server finds
# both ends of its connection with smcr_getsockname and smcr_getpeername;
# nm -D of the installed library shows exactly the functions of smcr.h;
# a program linked against LIBSMCR_0.1 (the calls that took a struct
# without its size) still finds them, and they read and write only the
# bytes 0.1's structs had; no libsmcr.la is installed and the .pc's Cflags
# are only the include directory.  Then server/ and client/ installed into
# the same tree: smcrd, smcrctl, smcr-fuse, smcr-attach and the nbdkit
# plugin need libsmcr.so.N (readelf -d), load the installed one and answer
# --help; make uninstall of smcr/ leaves no libsmcr file behind; every
# version node has its line in debian/libsmcr0.symbols.
# smcr-timeout: 120
. "${srcdir:-.}/functions.sh"
requires pkg-config --version
requires cc --version

d=$(scratch_dir)
root=$d/root
make_install -s -C "$abs_top_builddir/smcr" install DESTDIR="$root" >"$d/install.log" 2>&1 ||
    { cat "$d/install.log"; fail "make install of smcr/"; }
pc=$(find "$root" -name libsmcr.pc | head -n 1)
[ -n "$pc" ] || fail "no libsmcr.pc installed"
export PKG_CONFIG_PATH=${pc%/*} PKG_CONFIG_SYSROOT_DIR=$root
flags=$(pkg-config --cflags --libs libsmcr) || fail "pkg-config libsmcr"
case $flags in *"$root"*) ;; *) fail "pkg-config does not point into the install tree: $flags" ;; esac
so=$(find "$root" -name 'libsmcr.so.*' -type f | head -n 1)
[ -n "$so" ] || fail "no libsmcr.so installed"
la=$(find "$root" -name '*.la')
[ -z "$la" ] || fail "libtool archives installed: ${la//$root/}"
cflags=$(pkg-config --cflags libsmcr | sed "s/ *$//")
[ "$cflags" = "-I$root$(pkg-config --variable=includedir libsmcr | sed "s|^$root||")" ] ||
    fail "libsmcr.pc's Cflags are more than its include directory: $cflags"

# The exported symbols are exactly the functions of smcr.h.
sed -E -n 's/^[A-Za-z].*[ *](smcr_[a-z_]+)\(.*/\1/p' "$abs_top_srcdir/smcr/include/smcr.h" | sort -u >"$d/header"
nm -D --defined-only "$so" | awk '$2 ~ /^[TtWiDdBbRr]$/ { sub(/@.*/, "", $3); print $3 }' |
    sort -u >"$d/exported"
diff -u "$d/header" "$d/exported" >"$d/diff" ||
    { cat "$d/diff"; fail "libsmcr.so exports differ from smcr.h (- header, + exported)"; }
# A node per release (smcr/libsmcr.syms).
nm -D --defined-only "$so" | awk '{ print $3 }' >"$d/versioned"
for v in smcr_abort@@LIBSMCR_0.1 smcr_ctx_create@LIBSMCR_0.1 smcr_ctx_stats@LIBSMCR_0.1 \
         smcr_sock_info@LIBSMCR_0.1 smcr_ctx_create_size@@LIBSMCR_0.2 \
         smcr_ctx_stats_size@@LIBSMCR_0.2 smcr_sock_info_size@@LIBSMCR_0.2 \
         smcr_log_peer@@LIBSMCR_0.3 smcr_check_version@@LIBSMCR_0.3 \
         smcr_version_major@@LIBSMCR_0.3 smcr_version_minor@@LIBSMCR_0.3 \
         smcr_unreserve@@LIBSMCR_0.4; do
    grep -qxF "$v" "$d/versioned" || fail "libsmcr.so has no $v"
done
# Each node needs its line in the Debian symbols file, or dpkg-gensymbols
# adds one with the Debian revision and lintian rejects the package.
for node in $(grep -o '^LIBSMCR_[0-9.]*' "$abs_top_srcdir/smcr/libsmcr.syms"); do
    grep -q "^ (symver)$node " "$abs_top_srcdir/debian/libsmcr0.symbols" ||
        fail "debian/libsmcr0.symbols has no (symver)$node line"
done

# The page's client, as a user would copy it.
sed -n '/^\.SH EXAMPLES/,/^\.SH NOTES/p' "$abs_top_srcdir/man/libsmcr.3" |
    sed -n '/^\.EX/,/^\.EE/{p;/^\.EE/q}' | sed '1d;$d' |
    sed 's/\\e/\\/g; s/\\-/-/g' >"$d/client.c"
grep -q 'smcr_connect' "$d/client.c" || fail "no example client in libsmcr(3)"
cat >"$d/server.c" <<'C'
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <smcr.h>

/* Echoes one connection back until its end of stream. */
int main(int argc, char **argv)
{
    struct sockaddr_in sin = { .sin_family = AF_INET,
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    struct sockaddr_in me, peer;
    socklen_t mlen = sizeof(me), plen = sizeof(peer);
    struct smcr_sock *l, *s;
    struct smcr_ctx *ctx;
    char buf[4096];
    ssize_t n;

    if (argc != 2)
        return 2;
    sin.sin_port = htons(atoi(argv[1]));
    if (smcr_ctx_create(NULL, &ctx) < 0 ||
        smcr_listen(ctx, (struct sockaddr *)&sin, sizeof(sin), 1, &l) < 0)
        return 1;
    printf("listening\n");
    fflush(stdout);
    if (smcr_accept(l, &s) < 0 ||
        smcr_getsockname(s, (struct sockaddr *)&me, &mlen) < 0 ||
        smcr_getpeername(s, (struct sockaddr *)&peer, &plen) < 0)
        return 1;
    printf("sockname %s:%d\n", inet_ntoa(me.sin_addr), ntohs(me.sin_port));
    printf("peername %s\n", inet_ntoa(peer.sin_addr));
    fflush(stdout);
    while ((n = smcr_recv(s, buf, sizeof(buf), 0)) > 0)
        if (smcr_send_all(s, buf, n) < 0)
            return 1;
    smcr_shutdown(s, SHUT_WR);
    smcr_close(s);
    smcr_close(l);
    smcr_ctx_destroy(ctx);
    return n < 0;
}
C
# A program of LIBSMCR_0.1's time: its structs ended where 0.1's did (what
# lies after them is the program's, here 0xa5 bytes).
cat >"$d/old.c" <<'C'
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <smcr.h>

int old_create(const struct smcr_ctx_opts *opts, struct smcr_ctx **ctxp);
int old_stats(struct smcr_ctx *ctx, struct smcr_stats *st);
__asm__(".symver old_create, smcr_ctx_create@LIBSMCR_0.1");
__asm__(".symver old_stats, smcr_ctx_stats@LIBSMCR_0.1");

#define OPTS_0_1 (offsetof(struct smcr_ctx_opts, eids) + sizeof(const char *))
#define STATS_0_1 (offsetof(struct smcr_stats, cursor_requests) + sizeof(uint64_t))

int main(void)
{
    union { struct smcr_ctx_opts o; unsigned char b[sizeof(struct smcr_ctx_opts) + 64]; } opts;
    union { struct smcr_stats st; unsigned char b[sizeof(struct smcr_stats) + 64]; } st;
    struct smcr_ctx *ctx;
    size_t i;

    memset(opts.b, 0xa5, sizeof(opts.b));
    memset(&opts.o, 0, OPTS_0_1);
    opts.o.no_smc = true;
    if (old_create(&opts.o, &ctx) < 0)
        return 1;
    memset(st.b, 0xa5, sizeof(st.b));
    if (old_stats(ctx, &st.st) < 0 || st.st.connections != 0)
        return 1;
    for (i = STATS_0_1; i < sizeof(st.b); i++)
        if (st.b[i] != 0xa5)
            return 3;
    smcr_ctx_destroy(ctx);
    printf("old program ok\n");
    return 0;
}
C
# A library built with --enable-sanitizers needs its runtime in the program.
san=
readelf -d "$so" | grepq 'NEEDED.*libasan' && san="-fsanitize=address,undefined"
for p in client server old; do
    cc -Wall -Wextra -Werror $san -o "$d/$p" "$d/$p.c" $flags >"$d/$p.cc" 2>&1 ||
        { cat "$d/$p.cc"; fail "the $p does not build against the installed libsmcr"; }
done
export LD_LIBRARY_PATH=${so%/*}
ldd "$d/client" | grepq "$root" || fail "the client does not load the installed libsmcr.so"
SMCR_CTL=0 timeout 20 "$d/old" >"$d/old.out" 2>&1 ||
    { rc=$?; cat "$d/old.out"; fail "a program of LIBSMCR_0.1 failed (exit $rc)"; }

port=$(free_port)
"$d/server" "$port" >"$d/server.out" 2>"$d/server.err" &
srv=$!
cleanup_fn "kill $srv 2>/dev/null"
wait_for 10 grep -q listening "$d/server.out"
timeout 20 "$d/client" 127.0.0.1 "$port" >"$d/client.out" 2>"$d/client.err" ||
    { cat "$d/client.out" "$d/client.err"; fail "the example client failed"; }
wait "$srv" || fail "the echo server failed: $(cat "$d/server.err")"
grep -qx "sockname 127.0.0.1:$port" "$d/server.out" &&
    grep -qx "peername 127.0.0.1" "$d/server.out" ||
    { cat "$d/server.out"; fail "smcr_getsockname/smcr_getpeername: wrong ends"; }
# First line: SMC-R or the fallback reason; then the echo.
[ "$(sed -n 2p "$d/client.out")" = hello ] || { cat "$d/client.out"; fail "no echo"; }
# The programs of this tree link the shared library, not a copy of it.
for sub in server client; do
    make_install -s -C "$abs_top_builddir/$sub" install DESTDIR="$root" \
        >"$d/install-$sub.log" 2>&1 || { cat "$d/install-$sub.log"; fail "make install of $sub/"; }
done
soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
case $soname in libsmcr.so.[0-9]*) ;; *) fail "libsmcr's SONAME: '$soname'" ;; esac
progs=0
for p in smcrd smcrctl smcr-fuse smcr-attach nbdkit-smcr-plugin.so; do
    f=$(find "$root" -type f -name "$p" | head -n 1)
    if [ -z "$f" ]; then
        # not built: configure --without-fuse / --without-nbdkit
        case $p in
        smcr-fuse) grepq "^HAVE_FUSE3_TRUE='#'" "$abs_top_builddir/config.log" && continue ;;
        *.so) grepq "^HAVE_NBDKIT_TRUE='#'" "$abs_top_builddir/config.log" && continue ;;
        esac
        fail "$p not installed"
    fi
    readelf -d "$f" | grepq "NEEDED.*\[$soname\]" ||
        fail "$p does not link $soname: $(readelf -d "$f" | grep NEEDED | tr -s ' ' | tr '\n' ' ')"
    ldd "$f" | grep 'libsmcr\.so' | grepq "$root" || fail "$p does not load the installed libsmcr: $(ldd "$f" | grep libsmcr)"
    case $p in
    *.so) nm -D --undefined-only "$f" | grepq ' U smcr_connect' ||
            fail "the plugin does not take smcr_connect from libsmcr" ;;
    *) timeout 20 "$f" --help >"$d/help" 2>&1 || fail "$p --help: exit $? ($(head -n 3 "$d/help"))"
       grepq -i usage "$d/help" || fail "$p --help says no usage: $(head -n 3 "$d/help")" ;;
    esac
    progs=$((progs + 1))
done
[ "$progs" -ge 3 ] || fail "only $progs programs checked"
make_install -s -C "$abs_top_builddir/smcr" uninstall DESTDIR="$root" \
    >"$d/uninstall.log" 2>&1 || { cat "$d/uninstall.log"; fail "make uninstall of smcr/"; }
left=$(find "$root" -name 'libsmcr*' ! -name '*.3')
[ -z "$left" ] || fail "make uninstall left: ${left//$root/}"
echo "PASS: $progs programs link and load the installed $soname"
echo "PASS: installed libsmcr: $(wc -l <"$d/header") symbols as in smcr.h, LIBSMCR_0.1's sizeless calls kept; the libsmcr(3) example built with pkg-config and ran ($(head -n 1 "$d/client.out"))"
