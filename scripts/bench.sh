#!/usr/bin/env bash
# Simulation throughput on a real program, and coldcache sim end to end
# against Cachegrind, in one run (ratios are what to read: machines differ).
#
#   scripts/bench.sh [PROGRAM.c | COMMAND ARGS...]
#                                   (default: tests-programs/matmul.c;
#                                    e.g. scripts/bench.sh python3 -c pass)
#
# 1. builds the program (a .c file) and records its lackey trace (not timed);
# 2. cargo bench on that trace held in memory (cachegrind, jaguar x4 threads,
#    each with and without per-instruction attribution, and a floor loop);
# 3. times, best of 3 each: the program natively, valgrind cachegrind with
#    --cache-sim=yes on it, and `coldcache sim --cache cachegrind` on its
#    trace (plain and gzip), with the same geometry.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ $# -eq 0 ] || [[ "$1" == *.c ]]; then
  src=${1:-tests-programs/matmul.c}
  gcc -O1 -g -fno-pie -no-pie -o "$work/prog" "$src"
  prog=("$work/prog")
else
  src="$*"
  prog=("$(command -v "$1")" "${@:2}")
fi
geo=(--I1=32768,8,64 --D1=32768,8,64 --LL=8388608,16,64)
env -i PYTHONHASHSEED=0 valgrind --tool=lackey --trace-mem=yes --log-file="$work/trace.lackey" "${prog[@]}" >/dev/null
gzip -k -1 "$work/trace.lackey"
records=$(grep -vc '^==' "$work/trace.lackey")
echo "program: $src, $records trace records, $(du -h "$work/trace.lackey" | cut -f1) of lackey text"

cargo build --release -p coldcache-cli
rel=$(scripts/release-dir.sh)
COLDCACHE_BENCH_TRACE="$work/trace.lackey" cargo bench -q --manifest-path crates/sim/throughput-bench/Cargo.toml --bench throughput 2>&1 \
  | grep -E "^simulate/|thrpt|benchmarking" || true

best() { # best wall time of 3 runs, in seconds
  local b=999999
  for _ in 1 2 3; do
    local s e
    s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N)
    b=$(echo "$e - $s" | bc -l | awk -v b="$b" '{print ($1 < b) ? $1 : b}')
  done
  echo "$b"
}
native=$(best env -i PYTHONHASHSEED=0 "${prog[@]}")
cg=$(best env -i PYTHONHASHSEED=0 valgrind --tool=cachegrind --cache-sim=yes "${geo[@]}" --cachegrind-out-file=/dev/null "${prog[@]}")
cc=$(best "$rel/coldcache" sim --cache cachegrind --I1 32768,8,64 --D1 32768,8,64 --LL 8388608,16,64 --no-progress "$work/trace.lackey")
ccz=$(best "$rel/coldcache" sim --cache cachegrind --I1 32768,8,64 --D1 32768,8,64 --LL 8388608,16,64 --no-progress "$work/trace.lackey.gz")
printf '%-44s %8.3f s\n' "native program" "$native" \
  "valgrind --tool=cachegrind --cache-sim=yes" "$cg" \
  "coldcache sim (lackey text)" "$cc" \
  "coldcache sim (lackey text, gzip)" "$ccz"
echo "coldcache sim / cachegrind: $(echo "$cc / $cg" | bc -l | cut -c1-5) (text), $(echo "$ccz / $cg" | bc -l | cut -c1-5) (gzip)"
echo "coldcache sim records/s: $(echo "$records / $cc / 1000000" | bc -l | cut -c1-6) M"
