#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# libsmcr as installed: "make install DESTDIR=" of smcr/, then the client of
# libsmcr(3)'s EXAMPLES (cut from the page) and an echo server are built
# with only "pkg-config --cflags --libs libsmcr" of that tree and talk to
# each other over loopback (TCP fallback here: no RDMA); the server finds
# both ends of its connection with smcr_getsockname and smcr_getpeername;
# nm -D of the installed library shows exactly the functions of smcr.h.
# smcr-timeout: 120
. "${srcdir:-.}/functions.sh"
requires pkg-config --version
requires cc --version

d=$(scratch_dir)
root=$d/root
make -s -C "$abs_top_builddir/smcr" install DESTDIR="$root" >"$d/install.log" 2>&1 ||
    { cat "$d/install.log"; fail "make install of smcr/"; }
pc=$(find "$root" -name libsmcr.pc | head -n 1)
[ -n "$pc" ] || fail "no libsmcr.pc installed"
export PKG_CONFIG_PATH=${pc%/*} PKG_CONFIG_SYSROOT_DIR=$root
flags=$(pkg-config --cflags --libs libsmcr) || fail "pkg-config libsmcr"
case $flags in *"$root"*) ;; *) fail "pkg-config does not point into the install tree: $flags" ;; esac
so=$(find "$root" -name 'libsmcr.so.*' -type f | head -n 1)
[ -n "$so" ] || fail "no libsmcr.so installed"

# The exported symbols are exactly the functions of smcr.h.
sed -E -n 's/^[A-Za-z].*[ *](smcr_[a-z_]+)\(.*/\1/p' "$abs_top_srcdir/smcr/include/smcr.h" | sort -u >"$d/header"
nm -D --defined-only "$so" | awk '$2 ~ /^[TtWiDdBbRr]$/ { sub(/@.*/, "", $3); print $3 }' |
    sort -u >"$d/exported"
diff -u "$d/header" "$d/exported" >"$d/diff" ||
    { cat "$d/diff"; fail "libsmcr.so exports differ from smcr.h (- header, + exported)"; }

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
# A library built with --enable-sanitizers needs its runtime in the program.
san=
readelf -d "$so" | grepq 'NEEDED.*libasan' && san="-fsanitize=address,undefined"
for p in client server; do
    cc -Wall -Wextra -Werror $san -o "$d/$p" "$d/$p.c" $flags >"$d/$p.cc" 2>&1 ||
        { cat "$d/$p.cc"; fail "the $p does not build against the installed libsmcr"; }
done
export LD_LIBRARY_PATH=${so%/*}
ldd "$d/client" | grepq "$root" || fail "the client does not load the installed libsmcr.so"

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
echo "PASS: installed libsmcr: $(wc -l <"$d/header") symbols as in smcr.h; the libsmcr(3) example built with pkg-config and ran ($(head -n 1 "$d/client.out"))"
