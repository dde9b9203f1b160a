#!/usr/bin/env bash
# The main job on the bundled example: build coldcache and libcoldcache.so,
# capture the CacheSim talk's first example (examples/programs/pushbuffer.c,
# a hot flag in a cold cache line) and its fix, and show where the misses
# are and that the fix removes them.
#
#   scripts/demo.sh [OUTDIR]      (default: target/demo)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/demo}"
mkdir -p "$out"
cargo build --release -q -p coldcache-cli -p libcoldcache
cc=target/release/coldcache
cache=examples/caches/talk-scaled.toml

gcc -O2 -g -o "$out/pushbuffer" examples/programs/pushbuffer.c
gcc -O2 -g -DFIXED -o "$out/pushbuffer-fixed" examples/programs/pushbuffer.c

$cc record --cache "$cache" --function run_frames -o "$out/before.ccdump" -- "$out/pushbuffer"
$cc record --cache "$cache" --function run_frames -o "$out/after.ccdump" -- "$out/pushbuffer-fixed"

echo; echo "== the worst source lines by badness (mem squared / instructions)"
$cc report "$out/before.ccdump" --by line --sort badness --limit 5
echo; echo "== the hot loop, line by line"
$cc report "$out/before.ccdump" --view annotate build_push_buffer --columns instructions,mem,badness
echo; echo "== after swapping the two fields (-DFIXED)"
$cc diff "$out/before.ccdump" "$out/after.ccdump" --by line --limit 5 --columns instructions,mem
$cc export "$out/before.ccdump" --format flamegraph -o "$out/before.svg"
echo; echo "dumps, and a flame graph of the misses, in $out/"
