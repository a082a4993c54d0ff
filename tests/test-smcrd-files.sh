#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# smcrd's pid and log files: never opened through a
# symbolic link (a planted link must not make smcrd write to its target),
# a pid file only as a regular file, modes 0644 and 0640; a pid file from
# the config file is kept when --no-fixed-buffers is on the command line
# (their "set on the command line" bits were once the same).
# Pid and log files with other hard links are refused; a FIFO as
# the log file, as a read-only export or as an RBD export's ceph-conf
# refused at start without blocking, and a FIFO export added by SIGHUP is
# refused while smcrd goes on serving and stops on SIGTERM.  The pid file is removed at exit only
# in its own directory (not through a symbolic link put in the
# directory's place) and only while it holds smcrd's pid.  About 8 s.
# smcr-timeout: 120
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"

d=$(scratch_dir)
truncate -s 1M "$d/disk.img"
echo precious >"$d/victim"

refused() {
    local rc=0 what=$1; shift
    timeout 30 "$SMCRD" -f -l 127.0.0.1 -p "$(free_port)" -e "disk=$d/disk.img" "$@" \
        >"$d/out" 2>&1 || rc=$?
    [ "$rc" != 0 ] && [ "$rc" != 124 ] || { cat "$d/out"; fail "smcrd ran with $what"; }
    grep -q "$what" "$d/out" || { cat "$d/out"; fail "no reason given for $what"; }
    [ "$(cat "$d/victim")" = precious ] || fail "$what: the link's target was written"
}

ln -s "$d/victim" "$d/pid.link"
refused "pid file $d/pid.link: is a symbolic link" -P "$d/pid.link"
ln -s "$d/victim" "$d/log.link"
refused "log file $d/log.link: is a symbolic link" -L "$d/log.link"
mkfifo "$d/fifo"
refused "pid file $d/fifo: not a regular file" -P "$d/fifo"
echo "refused: a pid file and a log file through symbolic links, a pid file that is a FIFO"
ln "$d/victim" "$d/pid.hard"
refused "pid file $d/pid.hard: has 2 hard links" -P "$d/pid.hard"
ln "$d/victim" "$d/log.hard"
refused "log file $d/log.hard: has other hard links" -L "$d/log.hard"
refused "log file $d/fifo: .*FIFO" -L "$d/fifo"
refused "export 'pipe': $d/fifo: not a regular file or block device" -e "pipe=$d/fifo,ro"
echo "refused: pid and log files with hard links, a FIFO as log file and as read-only export"
# A FIFO as an RBD export's ceph-conf: refused, smcrd exits (librados
# would block in open() with every signal blocked: a hang, timeout's 124).
t0=$SECONDS
rc=0
timeout 10 "$SMCRD" -f -l 127.0.0.1 -p "$(free_port)" -e "disk=$d/disk.img" \
    -e "cfifo=rbd:pool/image,ceph-conf=$d/fifo" >"$d/out" 2>&1 || rc=$?
if grep -q "built without librbd" "$d/out"; then
    echo "ceph-conf FIFO: not checked, smcrd was built without librbd"
else
    [ "$rc" != 124 ] || { cat "$d/out"; fail "smcrd hung on a FIFO as ceph-conf"; }
    grep -q "export 'cfifo': .*$d/fifo: not a regular file" "$d/out" ||
        { cat "$d/out"; fail "no reason given for a FIFO as ceph-conf"; }
    echo "refused: a FIFO as ceph-conf, in $((SECONDS - t0)) s"
fi

# Modes, whatever the umask; the config file's pid file with a CLI option.
printf 'pidfile = %s\n' "$d/pid" >"$d/conf"
(umask 0; start_smcrd --config "$d/conf" --no-fixed-buffers -L "$d/log"
 wait_for 5 test -s "$d/pid"
 [ "$(cat "$d/pid")" = "$SMCRD_PID" ] || fail "pid file holds $(cat "$d/pid"), not $SMCRD_PID"
 [ "$(stat -c %a "$d/pid")" = 644 ] || fail "pid file mode $(stat -c %a "$d/pid")"
 [ "$(stat -c %a "$d/log")" = 640 ] || fail "log file mode $(stat -c %a "$d/log")"
 stop_smcrd) || exit
[ -e "$d/pid" ] && fail "pid file left behind"
echo "verified: pid file 0644 (from the config file, with --no-fixed-buffers), log file 0640"

# The pid file is removed at exit in the directory it was made in, and
# only if it is still smcrd's: not through a symbolic link put in the
# directory's place, not a file put in its own place.
mkdir "$d/run"
SMCRD_LOG=$d/pid1.log
start_smcrd -e "disk=$d/disk.img" -P "$d/run/smcrd.pid"
wait_for 5 test -s "$d/run/smcrd.pid"
mv "$d/run" "$d/run.moved"
mkdir "$d/other"
echo 4242 >"$d/other/smcrd.pid"
ln -s "$d/other" "$d/run"
stop_smcrd
[ "$(cat "$d/other/smcrd.pid" 2>/dev/null)" = 4242 ] ||
    fail "smcrd removed the pid file of the directory a symbolic link put in its place"
[ -e "$d/run.moved/smcrd.pid" ] && fail "smcrd left its own pid file (in the moved directory)"
rm "$d/run"
mkdir "$d/run"
SMCRD_LOG=$d/pid2.log
start_smcrd -e "disk=$d/disk.img" -P "$d/run/smcrd.pid"
wait_for 5 test -s "$d/run/smcrd.pid"
rm "$d/run/smcrd.pid"
echo 4242 >"$d/run/smcrd.pid"
stop_smcrd
[ "$(cat "$d/run/smcrd.pid" 2>/dev/null)" = 4242 ] || fail "smcrd removed a pid file not its own"
grep -q "pid file $d/run/smcrd.pid: not ours any more" "$SMCRD_LOG" ||
    fail "no word of the pid file left in place"
echo "verified: the pid file removed in its own directory and only while it is smcrd's"

# A FIFO export by SIGHUP: refused, the old exports stay, SIGTERM works.
printf '[export disk]\npath = %s\n' "$d/disk.img" >"$d/hup.conf"
SMCRD_LOG=$d/hup.log
start_smcrd --config "$d/hup.conf"
printf '[export pipe]\npath = %s\nread-only = yes\n' "$d/fifo" >>"$d/hup.conf"
kill -HUP "$SMCRD_PID"
wait_for 10 grep -q "not a regular file or block device" "$SMCRD_LOG"
probe 127.0.0.1 "$PORT" list | grepq -x disk || fail "no service after a SIGHUP with a FIFO export"
stop_smcrd
echo "SIGHUP: a FIFO export refused, served on, stopped on SIGTERM"
