#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# smcrd's pid and log files: never opened through a
# symbolic link (a planted link must not make smcrd write to its target),
# a pid file only as a regular file, modes 0644 and 0640; a pid file from
# the config file is kept when --no-fixed-buffers is on the command line
# (their "set on the command line" bits were once the same).
# Pid and log files with other hard links are refused; a FIFO as
# the log file or as a read-only export refused at start without
# blocking, and a FIFO export added by SIGHUP is refused while smcrd goes
# on serving and stops on SIGTERM.  About 5 s.
# smcr-timeout: 120
. "${srcdir:-.}/functions.sh"
. "$srcdir/test-smcrd-lib.sh"

d=$(scratch_dir)
truncate -s 1M "$d/disk.img"
echo precious >"$d/victim"

refused() {
    local rc=0 what=$1; shift
    timeout 10 "$SMCRD" -f -l 127.0.0.1 -p "$(free_port)" -e "disk=$d/disk.img" "$@" \
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
