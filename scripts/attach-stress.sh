#!/usr/bin/env bash
# Repeated `coldcache attach` of tests-programs/attach/threads.c (eight
# threads passing a token), each under a short deadline, to look for a
# hang. On a hang, the evidence is saved before anything is killed: every
# thread's /proc stat, wchan, syscall and status of both the program and
# `attach`, and gdb backtraces of every thread when gdb is installed.
#
# Usage: scripts/attach-stress.sh ROUNDS [MODE] [TIMEOUT_S] [LOAD]
#   MODE: fast (default), trap, auto; TIMEOUT_S: per attach (default 20);
#   LOAD: number of `yes > /dev/null` run meanwhile (default 0).
# Environment: COLDCACHE (binary, default cargo's
#   release directory, scripts/release-dir.sh),
#   COLDCACHE_LIB (library, default next to it), OUT (work directory,
#   default /tmp/attach-stress), ATTACH_ARGS (default
#   "--function step --calls 1"), FRESH (start a new program every FRESH
#   rounds, so that as many attaches load the library: default 0, never),
#   PROG_PREFIX (a command the program runs under, e.g. "chrt --idle 0" so
#   that the LOAD starves it and its threads are preempted anywhere for
#   long stretches, as on a saturated CI machine).
set -u
rounds=${1:?rounds}
mode=${2:-fast}
timeout_s=${3:-20}
load=${4:-0}
root=$(cd "$(dirname "$0")/.." && pwd)
cc_bin=${COLDCACHE:-$("$root/scripts/release-dir.sh")/coldcache}
export COLDCACHE_LIB=${COLDCACHE_LIB:-$(dirname "$cc_bin")/libcoldcache.so}
out=${OUT:-/tmp/attach-stress}
args=${ATTACH_ARGS:---function step --calls 1}
fresh=${FRESH:-0}
prefix=${PROG_PREFIX:-}
mkdir -p "$out"
gcc -O1 -g -pthread "$root/tests-programs/attach/threads.c" -o "$out/threads" || exit 2

loaders=()
for _ in $(seq 1 "$load"); do
    yes >/dev/null &
    loaders+=($!)
done
fifo="$out/stdin"
rm -f "$fifo"
mkfifo "$fifo"
launch() {
    # shellcheck disable=SC2086
    $prefix "$out/threads" <"$fifo" >"$out/threads.out" 2>&1 &
    prog=$!
    exec 3>"$fifo"
    # Attach once it runs its own code (not while `chrt` still execs it).
    until grep -q ready "$out/threads.out" 2>/dev/null; do sleep 0.05; done
}
# Ends the program (stdin closed) and checks its last line.
land() {
    exec 3>&-
    if wait "$prog"; then
        grep -q "every round agreed: yes" "$out/threads.out" || {
            echo "program output: $(cat "$out/threads.out")"
            return 1
        }
    else
        echo "program ended with status $?"
        return 1
    fi
}
launch
cleanup() {
    exec 3>&-
    for p in "${loaders[@]}"; do kill "$p" 2>/dev/null; done
}
trap cleanup EXIT

evidence() { # $1 pid, $2 file
    local pid=$1 f=$2
    {
        echo "=== process $pid: $(tr '\0' ' ' </proc/"$pid"/cmdline)"
        for t in /proc/"$pid"/task/*; do
            echo "--- task ${t##*/}"
            echo "stat: $(cat "$t/stat")"
            echo "wchan: $(cat "$t/wchan")"
            echo "syscall: $(cat "$t/syscall")"
            grep -E '^(State|SigBlk|SigPnd|ShdPnd|SigIgn|SigCgt|TracerPid)' "$t/status"
        done
    } >>"$f" 2>&1
    if command -v gdb >/dev/null; then
        timeout 60 gdb -p "$pid" -batch -ex 'set pagination off' \
            -ex 'info threads' -ex 'thread apply all bt' -ex 'thread apply all info registers rip rsp' \
            >>"$f.gdb" 2>&1
    fi
}

hangs=0
failed=0
for i in $(seq 1 "$rounds"); do
    if [ "$fresh" -gt 0 ] && [ "$i" -gt 1 ] && [ $(((i - 1) % fresh)) -eq 0 ]; then
        land || break
        launch
    fi
    log="$out/attach.$i.log"
    # shellcheck disable=SC2086
    "$cc_bin" attach "$prog" --no-resolve --mode "$mode" $args -o "$out/t.ccdump" >"$log" 2>&1 &
    att=$!
    waited=0
    while kill -0 "$att" 2>/dev/null && [ "$waited" -lt $((timeout_s * 10)) ]; do
        sleep 0.1
        waited=$((waited + 1))
    done
    if kill -0 "$att" 2>/dev/null; then
        hangs=$((hangs + 1))
        ev="$out/hang.$i"
        echo "round $i: attach $att did not finish in ${timeout_s}s; evidence in $ev*"
        evidence "$prog" "$ev.program"
        evidence "$att" "$ev.attach"
        kill "$att"
        wait "$att"
        cat "$log" >>"$ev.attach"
        break
    fi
    wait "$att"
    rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "round $i: attach failed ($rc):"
        cat "$log"
        failed=1
        break
    fi
    rm -f "$log"
    [ $((i % 25)) -eq 0 ] && echo "round $i ok ($(cut -d' ' -f1 /proc/loadavg) load)"
done
if [ "$hangs" -ne 0 ]; then
    echo "program $prog left running for inspection (its stdin: $fifo, held by this shell until exit)"
    echo "rounds run: $i, hangs: $hangs"
    exit 1
fi
land && echo "program: $(tail -1 "$out/threads.out")"
echo "rounds run: $i, hangs: $hangs, failed attaches: $failed"
[ "$hangs" -eq 0 ] && [ "$failed" -eq 0 ]
