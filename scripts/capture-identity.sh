#!/usr/bin/env bash
# Behaviour-unchanged check for refactorings of the capture engine: records
# every single-threaded program of tests-programs/ (and a few kernels of
# tests-programs/capture/kernels.c) with two builds of coldcache, with the
# `jaguar` and `cachegrind` presets, and compares the dumps and their traces
# record for record, and the dumps of runs without a trace (a replay
# counts differently then). Only what legitimately differs between two runs is
# left out: the pid, the start time and the duration (and thread ids in the
# trace). Address-space randomisation is turned off (setarch -R) so both runs
# see the same addresses, the programs are linked with `-z now` (a lazy
# binding inside the window reads the preloaded library's `.dynamic`, whose
# address moves with the library's size), and both builds are given paths of
# the same length (they reach the program's environment, so the stack).
#
#   scripts/capture-identity.sh OLD_DIR NEW_DIR [WORKDIR [kernels]]
#
# With `kernels` only the kernels are compared (the `--all` programs take
# minutes each under single-stepping).
#
# One difference is layout, not behaviour: when libcoldcache.so's TLS
# segment changes size (`readelf -lW libcoldcache.so | grep TLS`), the C
# library's thread-locals (errno, malloc's tcache) move, and glibc's `%fs:`
# accesses in the `--all` programs and k_libc may be served by another
# level. Check that every differing row's instruction is such an access
# (`objdump -d` at its offset in libc.so.6) before calling it a change.
#
# OLD_DIR and NEW_DIR each hold a `coldcache` binary and `libcoldcache.so`
# (copy them from cargo's release directory, scripts/release-dir.sh, before and after the change). Exits 1 and
# prints the first differences when a dump differs.
set -euo pipefail
cd "$(dirname "$0")/.."
old="$(cd "$1" && pwd)"; new="$(cd "$2" && pwd)"
if [ ${#old} != ${#new} ]; then
  echo "capture-identity: give OLD_DIR and NEW_DIR paths of the same length" >&2
  exit 2
fi
work="${3:-target/capture-identity}"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
cargo build --release -p coldcache-dump --example dump_records
printer="$(scripts/release-dir.sh)/examples/dump_records"

progs=()
for src in tests-programs/*.c; do
  name=$(basename "$src" .c)
  # x86isms from main to exit is not repeatable: two runs of one build
  # differ in a libc loop (its kernel is compared below, k_x86isms).
  [ "$name" = x86isms ] && continue
  gcc -O1 -g -fno-pie -no-pie -Wl,-z,now -o "$work/$name" "$src"
  progs+=("$name::--all")
done
[ "${4:-}" = kernels ] && progs=()
# The kernels link libcoldcache.so: one binary per build, each linked to its
# own library (two different libraries in one process would clash).
for side in old new; do
  dir=$old; [ $side = new ] && dir=$new
  gcc -O1 -g -fno-pie -no-pie -Wl,-z,now -Iinclude -o "$work/kernels-$side" \
    tests-programs/capture/kernels.c -L"$dir" -lcoldcache -Wl,-rpath,"$dir"
done
for k in strided struct_walk strings stack x86isms bits xlat longjmp libc; do
  if grep -q "k_$k" tests-programs/capture/kernels.c; then
    progs+=("kernels-SIDE:plain $k:--function k_$k")
  fi
done

# A normalised text of a dump: everything but pid, start time, duration,
# the library's own mapping (its size differs between builds) and the name
# of the per-build kernels binary.
show() {
  "$printer" "$1" | grep -v -E '^\s*(pid|start_unix_ns|duration_ns):' \
    | sed -E -e "s|$2/libcoldcache.so|LIB|" \
        -e 's/^module 0x[0-9a-f]+-0x[0-9a-f]+ off 0x[0-9a-f]+ LIB$/module LIB/' \
        -e 's/kernels-(old|new)/kernels/g'
}

fail=0
for entry in "${progs[@]}"; do
  IFS=: read -r name args how <<<"$entry"
  for cache in jaguar cachegrind; do
    for side in old new; do
      dir=$old; [ $side = new ] && dir=$new
      out="$work/x.ccdump"; trace="$work/x.cctrace"
      rm -f "$out" "$trace"
      # shellcheck disable=SC2086
      COLDCACHE_LIB="$dir/libcoldcache.so" setarch -R "$dir/coldcache" record --cache $cache \
        --no-resolve --trace "$trace" -o "$out" $how -- "$work/${name/SIDE/$side}" $args >/dev/null 2>&1
      show "$out" "$dir" >"$work/$name-$cache-$side.txt"
      "$dir/coldcache" sim --cache jaguar --json --no-progress "$trace" \
        | grep -v elapsed >"$work/$name-$cache-$side.sim.json"
      # Without a trace the replay counts plain executions in its block
      # cells (issue 35's (c)): its dump must equal the traced one's.
      rm -f "$out"
      # shellcheck disable=SC2086
      COLDCACHE_LIB="$dir/libcoldcache.so" setarch -R "$dir/coldcache" record --cache $cache \
        --no-resolve -o "$out" $how -- "$work/${name/SIDE/$side}" $args >/dev/null 2>&1
      show "$out" "$dir" >"$work/$name-$cache-$side.untraced.txt"
    done
    if cmp -s "$work/$name-$cache-old.txt" "$work/$name-$cache-new.txt" &&
       cmp -s "$work/$name-$cache-old.untraced.txt" "$work/$name-$cache-new.untraced.txt" &&
       cmp -s "$work/$name-$cache-old.sim.json" "$work/$name-$cache-new.sim.json"; then
      echo "same       ${name/-SIDE/} $args ($how, $cache): $(wc -l <"$work/$name-$cache-new.txt") lines"
    else
      echo "DIFFERENT  ${name/-SIDE/} $args ($how, $cache)"
      diff "$work/$name-$cache-old.txt" "$work/$name-$cache-new.txt" | head -20 || true
      diff "$work/$name-$cache-old.untraced.txt" "$work/$name-$cache-new.untraced.txt" | head -20 || true
      fail=1
    fi
  done
done
exit $fail
