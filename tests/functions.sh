# SPDX-License-Identifier: BSD-3-Clause
# Shared helpers for shell tests.  Source it first:  . "${srcdir:-.}/functions.sh"
#
#   requires CMD [ARGS...]   skip the test (exit 77) with a reason unless the
#                            command runs successfully
#   requires_root            skip unless running as root
#   cleanup_fn FN            run FN at exit, last registered first
#   fail MSG                 print MSG and exit 1
#   run_prog PROG ARGS...    run one of our programs, under valgrind when
#                            SMCR_VALGRIND=1 (see VALGRIND below)
#   wait_for SECONDS CMD...  poll until CMD succeeds, or fail
#   free_port                print a free TCP port on 127.0.0.1
#   grepq ARGS...            grep -q for the end of a pipeline: reads all its
#                            input, so the writer never dies of SIGPIPE (with
#                            pipefail that would fail the pipeline)
#   scratch_dir              print a fresh directory, removed at exit
#   backtraces PID           print every thread's stack of PID (gdb, if
#                            installed; 30 s at most): for a hung program
#
# Valgrind and smcrd with a disk (the block at the end):
#   VALGRIND                 the one valgrind switch: the words that put one
#                            of our programs under valgrind when
#                            SMCR_VALGRIND=1, else none.  "${VALGRIND[@]}"
#                            PROG ARGS & leaves $! the program's own pid
#   start_smcrd_disk SIZE ARGS...
#                            a sparse file of SIZE, $DISK ($d/disk.img; $d a
#                            scratch_dir unless set), served as export "disk"
#                            by start_smcrd ARGS (test-smcrd-lib.sh)

set -u
set -o pipefail

: "${srcdir:=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
: "${abs_top_builddir:=$(cd "$srcdir/.." && pwd)}"
: "${abs_top_srcdir:=$(cd "$srcdir/.." && pwd)}"
export srcdir abs_top_builddir abs_top_srcdir
skip() { echo "SKIP: $(basename "$0"): $*"; exit 77; }
fail() { echo "FAIL: $(basename "$0"): $*" >&2; exit 1; }

# tshark_smc ARGS: tshark that decodes SMC's CLC by content first.  Without
# -o tcp.try_heuristic_first, a connection whose ephemeral port has a
# dissector of its own (44818 is EtherNet/IP, 57000 IRC, ...) is decoded as
# that protocol and its CLC messages go uncounted.
tshark_smc() { tshark -o tcp.try_heuristic_first:TRUE "$@"; }

requires() {
    if ! "$@" >/dev/null 2>&1; then
        skip "requires '$*' (not available here)"
    fi
}

requires_root() {
    [ "$(id -u)" = 0 ] || skip "needs root"
}

_cleanup_fns=()
_run_cleanups() {
    local rc=$? i
    for (( i=${#_cleanup_fns[@]}-1; i>=0; i-- )); do
        eval "${_cleanup_fns[$i]}" || true
    done
    exit "$rc"
}
trap _run_cleanups EXIT
trap 'exit 130' INT TERM

cleanup_fn() { _cleanup_fns+=("$*"); }

run_prog() { "${VALGRIND[@]}" "$@"; }

backtraces() {
    command -v gdb >/dev/null || { echo "(no gdb: no backtraces of $1)"; return 0; }
    echo "--- threads of pid $1 ($(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | head -c 200))"
    timeout 30 gdb -q -batch -p "$1" -ex 'thread apply all bt' 2>&1 |
        grep -E '^(Thread|#)' | head -n 200 || true
}

# make_install ARGS...: make ARGS (an install or uninstall in the build
# tree) under a lock on the build directory itself (no file in the tree,
# which distcheck wants clean; not under $TMPDIR, which run-test makes per
# test): libtool relinks a module in the build tree when it installs it,
# and two tests installing at once (make check -j2) broke each other's
# relink ("syntax error in VERSION script").
make_install() {
    env -u MAKEFLAGS -u MFLAGS flock "$abs_top_builddir" make "$@"
}

wait_for() {
    local secs=$1 i; shift
    for (( i=0; i<secs*10; i++ )); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    fail "timed out after ${secs}s waiting for: $*"
}

grepq() {
    local rc=0
    grep -q "$@" || rc=$?
    cat >/dev/null
    return "$rc"
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
        echo $(( 20000 + RANDOM % 20000 ))
}

# Scratch directories live in one per test, removed at exit (scratch_dir
# runs in a $(...) subshell, where a cleanup_fn would be lost).
_scratch_top=$(mktemp -d "${TMPDIR:-/tmp}/smcrbd-test.XXXXXX") || fail "mktemp"
cleanup_fn "rm -rf '$_scratch_top'"
scratch_dir() { mktemp -d "$_scratch_top/d.XXXXXX"; }

# make_tls_pki DIR: certificates and keys for the TLS tests (certtool,
# psktool; nbdkit-tls(1)'s recipe), all valid 2 days:
#   DIR/pki     a CA and a server certificate for localhost and 127.0.0.1
#               (smcrd's --tls-certificates: it verifies clients too)
#   DIR/other   another CA, which signed nothing here
#   DIR/client  client certificate 'alice' from the CA, laid out as libnbd
#               wants it (ca-cert.pem, client-cert.pem, client-key.pem)
#   DIR/keys.psk  PSK identity alice
make_tls_pki() {
    local d=$1 pki=$1/pki
    mkdir -p "$pki" "$d/other" "$d/client"
    certtool --generate-privkey --outfile "$pki/ca-key.pem" 2>/dev/null
    printf 'cn = smcrbd test CA\nca\ncert_signing_key\nexpiration_days = 2\n' >"$d/ca.info"
    certtool --generate-self-signed --load-privkey "$pki/ca-key.pem" --template "$d/ca.info" \
        --outfile "$pki/ca-cert.pem" 2>/dev/null || fail "certtool: CA"
    certtool --generate-privkey --outfile "$pki/server-key.pem" 2>/dev/null
    printf 'cn = localhost\ndns_name = localhost\nip_address = 127.0.0.1\ntls_www_server\nencryption_key\nsigning_key\nexpiration_days = 2\n' >"$d/server.info"
    certtool --generate-certificate --load-ca-certificate "$pki/ca-cert.pem" \
        --load-ca-privkey "$pki/ca-key.pem" --load-privkey "$pki/server-key.pem" \
        --template "$d/server.info" --outfile "$pki/server-cert.pem" 2>/dev/null || fail "certtool: server"
    certtool --generate-privkey --outfile "$d/other/ca-key.pem" 2>/dev/null
    certtool --generate-self-signed --load-privkey "$d/other/ca-key.pem" --template "$d/ca.info" \
        --outfile "$d/other/ca-cert.pem" 2>/dev/null || fail "certtool: other CA"
    cp "$pki/ca-cert.pem" "$d/client/"
    certtool --generate-privkey --outfile "$d/client/client-key.pem" 2>/dev/null
    printf 'cn = alice\ntls_www_client\nencryption_key\nsigning_key\nexpiration_days = 2\n' >"$d/client.info"
    certtool --generate-certificate --load-ca-certificate "$pki/ca-cert.pem" \
        --load-ca-privkey "$pki/ca-key.pem" --load-privkey "$d/client/client-key.pem" \
        --template "$d/client.info" --outfile "$d/client/client-cert.pem" 2>/dev/null || fail "certtool: client"
    psktool -u alice -p "$d/keys.psk" >/dev/null 2>&1 || fail "psktool"
}

# --- valgrind; smcrd with a disk ---------------------------------------------
VALGRIND=()
if [ "${SMCR_VALGRIND:-0}" = 1 ]; then
    VALGRIND=(valgrind --quiet --error-exitcode=99 --leak-check=full
              --errors-for-leak-kinds=definite)
    # Under valgrind libsmcr cannot load its SYN option program: every peer
    # of the test runs without it, so that all of them agree on CLC.
    export SMCR_SYN_OPTION=off
fi

start_smcrd_disk() {
    local size=$1; shift
    : "${d:=$(scratch_dir)}"
    DISK=$d/disk.img
    truncate -s "$size" "$DISK" || fail "cannot make $DISK"
    start_smcrd --export "disk=$DISK" "$@"
}
