#!/usr/bin/env bash
# Added time per instrumented function call: coldcache's -finstrument-functions
# hooks (libcoldcache.so, recording every call) against `uftrace record` on the
# same binary: Lua 5.4.7 from the lua-src crate's bundled sources, built with
# gcc -O2 -finstrument-functions, running scripts/zones-bench/work.lua.
#
#   scripts/zones-bench.sh            # needs gcc, cargo, uftrace (apt-get install uftrace)
#   RUNS=7 scripts/zones-bench.sh
#
# coldcache streams the recording to its file from a background thread
# (the default of `zones record`), like uftrace's writer; the --no-stream row
# writes it at exit instead. RUNS rounds run every configuration once each
# (interleaved, so drift in the machine's speed hits all alike, and after a
# `sync`); the fastest run of each counts. Added time per
# call = (time with the tool - time of the same binary with glibc's no-op hooks)
# / calls, where calls is the number of function entries coldcache recorded
# (checked: no event dropped).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUNS=${RUNS:-5}
WORK=$(mktemp -d /tmp/coldcache-zones-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
command -v uftrace >/dev/null || { echo "uftrace is missing: apt-get install uftrace" >&2; exit 1; }

echo "== building coldcache and libcoldcache.so" >&2
(cd "$ROOT" && cargo build --release -p coldcache-cli -p libcoldcache)
CC_BIN="$("$ROOT/scripts/release-dir.sh")/coldcache"

echo "== fetching Lua sources (lua-src crate)" >&2
mkdir -p "$WORK/fetch/src"
cat > "$WORK/fetch/Cargo.toml" <<'TOML'
[package]
name = "luafetch"
version = "0.0.0"
edition = "2021"
[dependencies]
lua-src = "=547.1.0"
TOML
: > "$WORK/fetch/src/lib.rs"
cargo fetch -q --manifest-path "$WORK/fetch/Cargo.toml"
LUA_SRC=$(dirname "$(cargo metadata -q --format-version 1 --manifest-path "$WORK/fetch/Cargo.toml" |
  python3 -c 'import json,sys; print([p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"]=="lua-src"][0])')")/lua-5.4.7
echo "   $LUA_SRC" >&2

build() { # OUT EXTRA-FLAGS...
  local out=$1; shift
  gcc -O2 -g -DLUA_USE_LINUX "$@" -I"$LUA_SRC" -o "$out" \
    "$ROOT/scripts/zones-bench/host.c" $(ls "$LUA_SRC"/*.c | grep -v -e '/lua\.c$' -e '/luac\.c$') -lm -ldl
}
echo "== building Lua (plain and -finstrument-functions)" >&2
build "$WORK/lua-plain"
build "$WORK/lua-instr" -finstrument-functions
SCRIPT="$ROOT/scripts/zones-bench/work.lua"

# Wall time of one run in ns.
once() {
  local t0 t1
  t0=$(date +%s%N); "$@" >/dev/null 2>&1; t1=$(date +%s%N)
  echo $((t1 - t0))
}

cd "$WORK"
echo "== counting calls" >&2
"$CC_BIN" zones record -o "$WORK/count.zones" -- "$WORK/lua-instr" "$SCRIPT" >/dev/null 2>"$WORK/count.log"
cat "$WORK/count.log" >&2
EVENTS=$(sed -n 's/^coldcache: \([0-9]*\) events.*/\1/p' "$WORK/count.log")
grep -q dropped "$WORK/count.log" && { echo "events were dropped: raise --arena" >&2; exit 1; }
CALLS=$((EVENTS / 2))

echo "== timing ($RUNS rounds, every configuration once per round, fastest kept)" >&2
declare -A BEST
CONFIGS=(plain noop cc cc_spike cc_exit uf)
run_config() {
  case $1 in
    plain) once "$WORK/lua-plain" "$SCRIPT" ;;
    noop) once "$WORK/lua-instr" "$SCRIPT" ;;
    cc) once "$CC_BIN" zones record -o "$WORK/run.zones" -- "$WORK/lua-instr" "$SCRIPT" ;;
    cc_spike) once "$CC_BIN" zones record --threshold 1s -o "$WORK/run.zones" -- "$WORK/lua-instr" "$SCRIPT" ;;
    cc_exit) once "$CC_BIN" zones record --no-stream --arena 3G -o "$WORK/run.zones" -- "$WORK/lua-instr" "$SCRIPT" ;;
    uf) rm -rf "$WORK/uftrace.data"; once uftrace record -d "$WORK/uftrace.data" "$WORK/lua-instr" "$SCRIPT" ;;
  esac
}
for r in $(seq "$RUNS"); do
  for c in "${CONFIGS[@]}"; do
    sync # start each run with no dirty pages left by the one before
    t=$(run_config "$c")
    if [ -z "${BEST[$c]:-}" ] || [ "$t" -lt "${BEST[$c]}" ]; then BEST[$c]=$t; fi
  done
  echo "   round $r: $(for c in "${CONFIGS[@]}"; do printf '%s=%dms ' "$c" $((BEST[$c] / 1000000)); done)" >&2
done
T_PLAIN=${BEST[plain]}; T_NOOP=${BEST[noop]}; T_CC=${BEST[cc]}; T_CC_SPIKE=${BEST[cc_spike]}
T_CC_EXIT=${BEST[cc_exit]}; T_UF=${BEST[uf]}

SIZE_CC=$(stat -c %s "$WORK/count.zones")
SIZE_UF=$(du -sb "$WORK/uftrace.data" | cut -f1)
python3 - "$CALLS" "$T_PLAIN" "$T_NOOP" "$T_CC" "$T_CC_SPIKE" "$T_CC_EXIT" "$T_UF" "$SIZE_CC" "$SIZE_UF" <<'PY'
import sys
calls, plain, noop, cc, ccs, cce, uf, scc, suf = map(int, sys.argv[1:])
per = lambda t: (t - noop) / calls
print(f"instrumented calls per run: {calls}")
print(f"{'configuration':<52} {'time ms':>9} {'added ns/call':>14}")
print(f"{'lua, not instrumented':<52} {plain/1e6:9.1f}")
print(f"{'lua -finstrument-functions, glibc no-op hooks':<52} {noop/1e6:9.1f} {'(baseline)':>14}")
print(f"{'coldcache zones record (every call recorded)':<52} {cc/1e6:9.1f} {per(cc):14.1f}")
print(f"{'coldcache zones record --threshold 1s (+ spikes)':<52} {ccs/1e6:9.1f} {per(ccs):14.1f}")
print(f"{'coldcache zones record --no-stream (write at exit)':<52} {cce/1e6:9.1f} {per(cce):14.1f}")
print(f"{'uftrace record':<52} {uf/1e6:9.1f} {per(uf):14.1f}")
print(f"data written: coldcache {scc/1e6:.0f} MB, uftrace {suf/1e6:.0f} MB")
print(f"uftrace / coldcache added time per call: {per(uf)/per(cc):.1f}x (recording), {per(uf)/per(ccs):.1f}x (with spike detection)")
PY
