#!/usr/bin/env bash
# The main job on the bundled example: build coldcache and libcoldcache.so,
# capture the CacheSim talk's first example (examples/programs/pushbuffer.c,
# a hot flag in a cold cache line) and its fix, show where the misses are and
# that the fix removes them, and end with what to do next.
#
#   scripts/demo.sh [OUTDIR]      (default: target/demo)
#
# COLDCACHE=PATH uses that coldcache (and COLDCACHE_LIB its library) instead
# of building them (the tests and CI do). Otherwise it builds them (cargo's
# progress on stderr) and asks cargo where they are (scripts/release-dir.sh:
# CARGO_TARGET_DIR and the like are followed). The demo's own words start
# with `==`; each coldcache command is shown as `$ coldcache ...` and what
# it prints (stdout and stderr) follows, each line behind `  | `.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-target/demo}"
mkdir -p "$out"
say() { printf '\n== %s\n' "$*"; }
die() { printf 'demo.sh: %s\n' "$*" >&2; exit 1; }

if [ -z "${COLDCACHE:-}" ]; then
    say "building coldcache and libcoldcache.so (cargo build --release: a few minutes the first time, seconds after; cargo's progress is on stderr)" >&2
    cargo build --release -p coldcache-cli -p libcoldcache
    rel=$(scripts/release-dir.sh) || die "cargo built coldcache but could not say where (scripts/release-dir.sh failed)"
    COLDCACHE=$rel/coldcache
    [ -x "$COLDCACHE" ] || die "cargo built coldcache, but it is not at $COLDCACHE (the target directory cargo metadata gives, + /release): set COLDCACHE=PATH to the binary"
fi
cc=$COLDCACHE
command -v "$cc" >/dev/null || die "COLDCACHE=$cc is not an executable"
# One coldcache command: shown as `$ coldcache ARGS`, its output (stdout and
# stderr, in order) behind `  | ` so that it is not taken for the demo's words.
run() {
    printf '$ coldcache %s\n' "$*"
    "$cc" "$@" 2>&1 | sed -u 's/^/  | /'
}
cache=examples/caches/talk-scaled.toml

say "compiling the example with gcc -O2 -g: $out/pushbuffer, and its fix (-DFIXED) $out/pushbuffer-fixed"
gcc -O2 -g -o "$out/pushbuffer" examples/programs/pushbuffer.c
gcc -O2 -g -DFIXED -o "$out/pushbuffer-fixed" examples/programs/pushbuffer.c

say "capturing run_frames in both, simulated with $cache (a scaled-down cache of the talk's console)"
run record --cache "$cache" --function run_frames -o "$out/before.ccdump" "$out/pushbuffer"
run record --cache "$cache" --function run_frames -o "$out/after.ccdump" "$out/pushbuffer-fixed"

say "the worst source lines by badness (mem squared / instructions)"
run report "$out/before.ccdump" --by line --sort badness --limit 5
say "the hot loop, line by line"
run report "$out/before.ccdump" --view annotate build_push_buffer --columns instructions,mem,badness
say "after swapping the two fields (-DFIXED)"
run diff "$out/before.ccdump" "$out/after.ccdump" --by line --limit 5 --columns instructions,mem
run export "$out/before.ccdump" --format flamegraph -o "$out/before.svg"

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
