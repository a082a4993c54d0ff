#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# tests/run-test runs a lane test once more when it failed because a
# guest's kernel oopsed in rdma_rxe (tests/vm/lib.sh's _vm_cleanup finds
# the oops in the serial log), and only then.  Fake lane tests (lib.sh
# sourced, one "VM" whose serial log is written by hand, no qemu) check:
#   (1) an rxe oops, then a pass: rerun once, PASS, the RERUN banner and
#       the oops's first lines in the output;
#   (2) an rxe oops twice, the test failing where its output is discarded:
#       two runs, FAIL, "again on the rerun", both FAIL lines and oops
#       reports in the output;
#   (3) an oops elsewhere (nbd): one run, FAIL, no rerun;
#   (4) a plain failure: one run, no rerun;
#   (5) a pass with an rxe oops in the log: one run, PASS.
# smcr-timeout: 60
. "${srcdir:-.}/functions.sh"

d=$(scratch_dir)
rxe_oops='[  126.8] traps: PANIC: double fault, error_code: 0x0
[  126.8] Oops: double fault: 0000 [#1] PREEMPT SMP NOPTI
[  126.8] CPU: 0 UID: 0 PID: 97 Comm: kworker/u4:3 Not tainted 6.12.117+deb12-amd64 #1
[  126.8] Workqueue: rxe_wq do_work [rdma_rxe]
[  126.8] RIP: 0010:__kmalloc_node_track_caller+0x5e/0x3a0
[  126.8]  rxe_requester+0x2c1/0x1010 [rdma_rxe]
[  126.8] Kernel panic - not syncing: Fatal exception'
nbd_oops='[   80.1] BUG: kernel NULL pointer dereference, address: 0000000000000008
[   80.1] Oops: 0000 [#1] PREEMPT SMP NOPTI
[   80.1] Workqueue: knbd0-recv recv_work [nbd]
[   80.1] RIP: 0010:recv_work+0x33/0x2f0 [nbd]
[   80.1] Modules linked in: nbd rdma_rxe ib_uverbs ib_core
[   80.1] Kernel panic - not syncing: Fatal exception'
# fake.sh SCENARIO: attempt N (counted in $d/runs-SCENARIO) writes the
# serial log and ends as SCENARIO says for that attempt.
cat >"$d/fake.sh" <<'EOF'
#!/bin/bash
sc=$1
. "$abs_top_srcdir/tests/vm/lib.sh"
SMCR_VM_WORKDIR=$FAKE_DIR/work-$sc
_vm_workdir
n=$(( $(cat "$FAKE_DIR/runs-$sc" 2>/dev/null || echo 0) + 1 ))
echo "$n" >"$FAKE_DIR/runs-$sc"
_vm_names=(B)
_vm_dir[B]=$_vm_work/B
mkdir -p "$_vm_work/B/share"
touch "$_vm_work/B/qemu.rc"
case $sc:$n in
    1:1 | 2:* | 5:*) printf 'guest B: ready\n%s\n' "$FAKE_RXE" >"$_vm_work/B/serial.log" ;;
    3:*) printf 'guest B: ready\n%s\n' "$FAKE_NBD" >"$_vm_work/B/serial.log" ;;
    *) echo 'guest B: ready' >"$_vm_work/B/serial.log" ;;
esac
case $sc:$n in
    1:2 | 5:*) echo "PASS: fake $sc"; exit 0 ;;
esac
# (2) fails where the test discards the output (eval CUT >/dev/null)
[ "$sc" = 2 ] && eval 'fail "fake $sc: vm_run B: the guest is gone"' >/dev/null 2>&1
fail "fake $sc: vm_run B: the guest is gone"
EOF
export FAKE_DIR=$d FAKE_RXE=$rxe_oops FAKE_NBD=$nbd_oops

# run SCENARIO: run-test on the fake test; sets out, rc, runs.
run() {
    rc=0
    out=$(bash "$abs_top_srcdir/tests/run-test" "$d/fake.sh" "$1" 2>&1) || rc=$?
    runs=$(cat "$d/runs-$1")
}
run 1
[ "$rc" = 0 ] && [ "$runs" = 2 ] || { echo "$out"; fail "(1) rxe oops then pass: exit $rc after $runs runs, not 0 after 2"; }
echo "$out" | grepq '^RERUN: .*oopsed in rdma_rxe' || { echo "$out"; fail "(1) no RERUN banner"; }
echo "$out" | grepq '^RERUN:   .*Workqueue: rxe_wq do_work \[rdma_rxe\]' || { echo "$out"; fail "(1) the oops's lines not shown"; }
echo "$out" | grepq 'the oops is in rdma_rxe' || { echo "$out"; fail "(1) lib.sh did not name the oops"; }
[ -s "$d/work-1-oops-B-serial.log" ] || { echo "$out"; fail "(1) the oopsed serial log was not kept beside the work dir"; }
run 2
[ "$rc" = 1 ] && [ "$runs" = 2 ] || { echo "$out"; fail "(2) rxe oops twice: exit $rc after $runs runs, not 1 after 2"; }
echo "$out" | grepq 'oopsed in rdma_rxe again on the rerun' || { echo "$out"; fail "(2) no 'again on the rerun'"; }
[ "$(echo "$out" | grep -c '^FAIL: fake.sh: fake 2')" = 2 ] && [ "$(echo "$out" | grep -c 'its kernel oopsed')" = 2 ] ||
    { echo "$out"; fail "(2) a failure under a discarded output lost its FAIL line or serial log"; }
run 3
[ "$rc" = 1 ] && [ "$runs" = 1 ] || { echo "$out"; fail "(3) nbd oops: exit $rc after $runs runs, not 1 after 1"; }
echo "$out" | grepq 'its kernel oopsed' || { echo "$out"; fail "(3) the oops report not shown"; }
echo "$out" | grepq -e '^RERUN' -e 'is in rdma_rxe' && { echo "$out"; fail "(3) an oops outside rdma_rxe was taken for one in it"; }
run 4
[ "$rc" = 1 ] && [ "$runs" = 1 ] || { echo "$out"; fail "(4) plain failure: exit $rc after $runs runs, not 1 after 1"; }
echo "$out" | grepq '^RERUN' && { echo "$out"; fail "(4) a plain failure was rerun"; }
run 5
[ "$rc" = 0 ] && [ "$runs" = 1 ] || { echo "$out"; fail "(5) pass: exit $rc after $runs runs, not 0 after 1"; }
echo "PASS: run-test reruns a lane test once for an oops in rdma_rxe (a second one fails), never for another oops, a plain failure or a pass"
