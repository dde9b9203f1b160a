#!/usr/bin/env bash
# gungraun (crates.io, unchanged) running tests-programs/gungraun-bench under
# real Valgrind and under coldcache (GUNGRAUN_VALGRIND_BIN pointing at a link
# named `valgrind` to the coldcache binary): each saves a baseline, then
# runs the planted regression (`--features regress`: the benchmarked loop
# twice) against it with `--callgrind-limits=ir=5%`, which must fail with
# gungraun's regression status 3. Prints gungraun's tables, the Ir of each
# run, and wall/CPU time of each run (/usr/bin/time), the two tools
# alternated ROUNDS times. Not in CI: gungraun takes minutes to compile.
#
# Usage: scripts/gungraun-check.sh [ROUNDS]   (default 3)
# Environment: OUT (scratch directory, default /tmp/coldcache-gungraun; the
#   bench crate is copied there, its Cargo.lock and target stay there),
#   COLDCACHE (binary, default scripts/release-dir.sh's coldcache, built
#   with libcoldcache.so beside it). gungraun-runner 0.20.0 is installed
#   into OUT with `cargo install` when not on PATH at that version.
# Exit: 0 when both tools run the benchmark, their Ir are equal and both
# regression checks fire; 1 otherwise. (The time includes cargo's check that
# the benchmark is built, about 0.1 s.)
set -u
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
OUT=${OUT:-/tmp/coldcache-gungraun}
COLDCACHE=${COLDCACHE:-$(scripts/release-dir.sh)/coldcache}
VERSION=0.20.0
[ -x "$COLDCACHE" ] || { echo "no coldcache at $COLDCACHE (cargo build --release -p coldcache-cli -p libcoldcache)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }
mkdir -p "$OUT/bin"
rm -rf "$OUT/bench" && cp -r tests-programs/gungraun-bench "$OUT/bench"
export CARGO_TARGET_DIR="$OUT/target"
if [ "$(gungraun-runner --version 2>/dev/null | awk '{print $2}')" != "$VERSION" ]; then
    if [ ! -x "$OUT/runner/bin/gungraun-runner" ]; then
        echo "== installing gungraun-runner $VERSION into $OUT/runner"
        cargo install gungraun-runner --version "$VERSION" --root "$OUT/runner" --locked -q ||
            cargo install gungraun-runner --version "$VERSION" --root "$OUT/runner" -q || exit 1
    fi
    export PATH="$OUT/runner/bin:$PATH"
fi
ln -sf "$(realpath "$COLDCACHE")" "$OUT/bin/valgrind"
cd "$OUT/bench"
echo "== building the benchmark (both variants)"
cargo bench --bench sum --no-run -q || exit 1
cargo bench --bench sum --no-run -q --features regress || exit 1

TIME='%e s wall, %U+%S s CPU, %M KB'
fail=0
# run TOOL LABEL ARGS...: one gungraun run, its output kept in $OUT/TOOL.LABEL.txt.
run() {
    local tool=$1 label=$2
    shift 2
    local env=(GUNGRAUN_HOME="$OUT/home-$tool")
    [ "$tool" = coldcache ] && env+=(GUNGRAUN_VALGRIND_BIN="$OUT/bin/valgrind")
    env "${env[@]}" /usr/bin/time -f "$TIME" -o "$OUT/$tool.$label.time" \
        cargo bench --bench sum -q "$@" >"$OUT/$tool.$label.txt" 2>&1
    echo $? >"$OUT/$tool.$label.status"
}
# The Instructions of each benchmark of a run, in order: "135205 67500229".
ir() { awk '/Instructions:/ {split($2, a, "|"); printf "%s%s", s, a[1]; s = " "}' "$1"; }
# /usr/bin/time's figures (its last line: the first may say the status).
took() { tail -n 1 "$1"; }

for r in $(seq 1 "$ROUNDS"); do
    for tool in valgrind coldcache; do
        rm -rf "$OUT/home-$tool"
        run "$tool" "base$r" -- --save-baseline=base
        run "$tool" "regress$r" --features regress -- --baseline=base --callgrind-limits=ir=5%
    done
done

for tool in valgrind coldcache; do
    echo
    echo "== $tool: gungraun's table (round 1, baseline run)"
    cat "$OUT/$tool.base1.txt"
    echo "== $tool: the planted regression against it (round 1)"
    cat "$OUT/$tool.regress1.txt"
    for r in $(seq 1 "$ROUNDS"); do
        b=$(cat "$OUT/$tool.base$r.status") g=$(cat "$OUT/$tool.regress$r.status")
        echo "$tool round $r: baseline Ir $(ir "$OUT/$tool.base$r.txt") (status $b; $(took "$OUT/$tool.base$r.time")), regress Ir $(ir "$OUT/$tool.regress$r.txt") (status $g; $(took "$OUT/$tool.regress$r.time"))"
        [ "$b" = 0 ] || { echo "FAIL: $tool baseline run status $b"; fail=1; }
        [ "$g" = 3 ] || { echo "FAIL: $tool regression not caught (status $g, gungraun's regression status is 3)"; fail=1; }
    done
done
for r in $(seq 1 "$ROUNDS"); do
    for label in base regress; do
        a=$(ir "$OUT/valgrind.$label$r.txt") b=$(ir "$OUT/coldcache.$label$r.txt")
        [ -n "$a" ] && [ "$a" = "$b" ] || { echo "FAIL: $label round $r: Ir valgrind $a, coldcache $b"; fail=1; }
    done
done
[ "$fail" = 0 ] && echo "OK: same Ir under both, regression caught under both"
exit "$fail"
