#!/usr/bin/env bash
# The main job on the bundled example: build coldcache and libcoldcache.so,
# capture the CacheSim talk's first example (examples/programs/pushbuffer.c,
# a hot flag in a cold cache line) and its fix, show where the misses are and
# that the fix removes them, and end with what to do next.
#
#   scripts/demo.sh [OUTDIR]      (default: target/demo)
#
# COLDCACHE=PATH uses that coldcache (and COLDCACHE_LIB its library) instead
# of building them (the tests do).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/demo}"
mkdir -p "$out"
say() { printf '\n== %s\n' "$*"; }

if [ -z "${COLDCACHE:-}" ]; then
    say "building coldcache and libcoldcache.so (cargo build --release: a few minutes the first time, seconds after)"
    cargo build --release -q -p coldcache-cli -p libcoldcache
    COLDCACHE=target/release/coldcache
fi
cc=$COLDCACHE
cache=examples/caches/talk-scaled.toml

say "compiling the example with gcc -O2 -g: $out/pushbuffer, and its fix (-DFIXED) $out/pushbuffer-fixed"
gcc -O2 -g -o "$out/pushbuffer" examples/programs/pushbuffer.c
gcc -O2 -g -DFIXED -o "$out/pushbuffer-fixed" examples/programs/pushbuffer.c

say "capturing run_frames in both, simulated with $cache (a scaled-down cache of the talk's console)"
$cc record --cache "$cache" --function run_frames -o "$out/before.ccdump" "$out/pushbuffer"
$cc record --cache "$cache" --function run_frames -o "$out/after.ccdump" "$out/pushbuffer-fixed"

say "the worst source lines by badness (mem squared / instructions)"
$cc report "$out/before.ccdump" --by line --sort badness --limit 5
say "the hot loop, line by line"
$cc report "$out/before.ccdump" --view annotate build_push_buffer --columns instructions,mem,badness
say "after swapping the two fields (-DFIXED)"
$cc diff "$out/before.ccdump" "$out/after.ccdump" --by line --limit 5 --columns instructions,mem
$cc export "$out/before.ccdump" --format flamegraph -o "$out/before.svg"

bin=$(cd "$(dirname "$cc")" && pwd)
say "next steps"
cat <<NEXT
Dumps and a flame graph of the misses are in $out/.

  export PATH="$bin:\$PATH"        # coldcache on your PATH (or copy $bin/coldcache and libcoldcache.so together)
  coldcache ui $out/before.ccdump $out/after.ccdump     # both in the browser: views, source, comparison

Your own program (build it with -g; keep -O2):
  coldcache record --function HOT_FUNCTION ./prog ARGS    # one function's calls (a C, C++ or Rust name)
  coldcache record --all ./prog ARGS                      # the whole of main
  coldcache report coldcache.ccdump                        # then --by line, --view annotate HOT_FUNCTION
More: README.md ("Capturing a live program", "Reading a capture").
NEXT
