#!/usr/bin/env bash
# Peak memory and CPU time of `coldcache zones` views and exports on a large
# synthetic recording (issue 36: exports needed ~1.9 KB per event, a 19M-event
# recording was killed at 24 GB). scripts/zones-bench/gen.c is recorded with
# `coldcache zones record` (408 events a frame; FRAMES=46600 is 19.0M events),
# then each format and view runs under /usr/bin/time -v (maximum resident set
# size, user + system time). With OLD=path/to/an/older/coldcache, that binary
# runs the same commands on a smaller recording (OLD_FRAMES, default 4900: 2.0M
# events; the old exports hold every event in memory) and its outputs are
# compared byte for byte with the new binary's on it.
#
#   OLD=/tmp/old/coldcache scripts/zones-export-bench.sh
#   FRAMES=46600 OLD_FRAMES=4900 scripts/zones-export-bench.sh
#
# Files live in a temporary directory under $TMPDIR (/tmp), removed at exit;
# the 19M-event Chrome export alone is 2.7 GB, each output is removed once
# measured.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FRAMES=${FRAMES:-46600}
OLD_FRAMES=${OLD_FRAMES:-4900}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/coldcache-zones-export-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export TMPDIR=$WORK

if [ -z "${NEW:-}" ]; then
  (cd "$ROOT" && cargo build --release -p coldcache-cli -p libcoldcache >&2)
  NEW="$("$ROOT/scripts/release-dir.sh")/coldcache"
fi
LIB=$(dirname "$NEW")
gcc -O2 -pthread -I"$ROOT/include" -L"$LIB" -o "$WORK/gen" "$ROOT/scripts/zones-bench/gen.c" -lcoldcache

record() { # FRAMES FILE
  LD_LIBRARY_PATH=$LIB "$NEW" zones record -o "$2" -- "$WORK/gen" "$1" 2>&1 | grep events >&2
}

printf '%-5s %9s %-24s %10s %8s %8s %12s\n' binary events command "peak MB" "CPU s" "wall s" "output MB"
measure() { # LABEL BIN FILE EVENTS ARGS...
  local label=$1 bin=$2 file=$3 events=$4; shift 4
  local out="$WORK/out.$label"
  /usr/bin/time -v -o "$WORK/time" "$bin" zones "$file" "$@" -o "$out" 2>"$WORK/err" >/dev/null ||
    { echo "$label $* failed:"; tail -3 "$WORK/err"; }
  local rss user sys wall
  rss=$(awk -F': ' '/Maximum resident/ {print $2}' "$WORK/time")
  user=$(awk -F': ' '/User time/ {print $2}' "$WORK/time")
  sys=$(awk -F': ' '/System time/ {print $2}' "$WORK/time")
  wall=$(awk -F': ' '/Elapsed/ {print $2}' "$WORK/time")
  printf '%-5s %9s %-24s %10.1f %8.2f %8s %12.1f\n' "$label" "$events" "$*" "$(echo "$rss/1024" | bc -l)" \
    "$(echo "$user+$sys" | bc -l)" "$wall" "$(echo "$(stat -c %s "$out" 2>/dev/null || echo 0)/1048576" | bc -l)"
}

FORMATS=("--format chrome" "--format speedscope" "--format folded" "--view top-down" "--view flat" "--view timeline")

if [ -n "${OLD:-}" ]; then
  record "$OLD_FRAMES" "$WORK/small.zones"
  ev=$((OLD_FRAMES * 408))
  for f in "${FORMATS[@]}"; do
    # shellcheck disable=SC2086
    measure old "$OLD" "$WORK/small.zones" $ev $f; mv "$WORK/out.old" "$WORK/keep.old"
    # shellcheck disable=SC2086
    measure new "$NEW" "$WORK/small.zones" $ev $f
    cmp -s "$WORK/keep.old" "$WORK/out.new" && echo "      same output, byte for byte" || echo "      OUTPUTS DIFFER"
    rm -f "$WORK/keep.old" "$WORK/out.new"
  done
  rm -f "$WORK/small.zones"
fi
record "$FRAMES" "$WORK/big.zones"
echo "recording: $(($(stat -c %s "$WORK/big.zones") / 1048576)) MB, $((FRAMES * 408)) events" >&2
for f in "${FORMATS[@]}"; do
  # shellcheck disable=SC2086
  measure new "$NEW" "$WORK/big.zones" $((FRAMES * 408)) $f
  rm -f "$WORK/out.new"
done
