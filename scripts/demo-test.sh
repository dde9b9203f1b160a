#!/usr/bin/env bash
# Test of scripts/demo.sh's building path without building anything (a few
# seconds; .ci/run runs it): a fake `cargo` on PATH answers `cargo metadata`
# with a target directory elsewhere (as CARGO_TARGET_DIR makes it) and logs
# `cargo build`; a fake `coldcache` there logs its arguments and prints a
# line on stdout and one on stderr. Checks that demo.sh
#  - builds without -q (cargo's progress reaches stderr) and says so first,
#  - runs the coldcache of the directory cargo names, not target/release,
#  - labels the program's output (`$ coldcache ...`, then `  | ` lines),
#  - names that directory in the next steps' `export PATH=`,
#  - and, when cargo's directory has no coldcache, stops at once with a
#    message naming the path (not exit 127 after the build).
# Then scripts/release-dir.sh with CARGO_BUILD_TARGET (the triple is added).
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "demo-test: FAIL: $*" >&2; exit 1; }

mkdir -p "$work/fakebin" "$work/target dir/release"
cat >"$work/fakebin/cargo" <<FAKE
#!/usr/bin/env bash
case "\$1" in
  metadata) python3 -c 'import json, sys; print(json.dumps({"target_directory": sys.argv[1], "packages": []}))' "$work/target dir" ;;
  build) echo "cargo \$*" >>"$work/cargo.log"; echo "   Compiling fake-progress" >&2 ;;
  *) echo "fake cargo: unexpected \$*" >&2; exit 2 ;;
esac
FAKE
cat >"$work/target dir/release/coldcache" <<FAKE
#!/usr/bin/env bash
echo "\$*" >>"$work/coldcache.log"
echo "fake-stdout-line"
echo "fake-stderr-line" >&2
FAKE
chmod +x "$work/fakebin/cargo" "$work/target dir/release/coldcache"

# 1. The binary is where cargo says.
env -u COLDCACHE PATH="$work/fakebin:$PATH" CARGO_TARGET_DIR="$work/target dir" \
    scripts/demo.sh "$work/out" >"$work/stdout" 2>"$work/stderr" \
    || fail "demo.sh exited $?: $(cat "$work/stderr")"
grep -qx 'cargo build --release -p coldcache-cli -p libcoldcache' "$work/cargo.log" \
    || fail "cargo build ran as: $(cat "$work/cargo.log")"
grep -q '^== building coldcache' "$work/stderr" || fail "the build is not announced on stderr"
grep -q 'Compiling fake-progress' "$work/stderr" || fail "cargo's progress does not reach stderr"
[ "$(grep -c '^record ' "$work/coldcache.log")" = 2 ] || fail "not the fake coldcache's two records: $(cat "$work/coldcache.log" 2>/dev/null)"
grep -q '^export .*--format flamegraph' "$work/coldcache.log" || fail "no export run"
grep -q '^\$ coldcache record --cache' "$work/stdout" || fail "the record command is not shown"
grep -qx '  | fake-stdout-line' "$work/stdout" || fail "the program's stdout is not labelled"
grep -qx '  | fake-stderr-line' "$work/stdout" || fail "the program's stderr is not labelled"
if grep -q '^fake-std' "$work/stdout" "$work/stderr"; then fail "unlabelled program output"; fi
grep -qF "export PATH=\"$work/target dir/release:" "$work/stdout" || fail "the next steps do not name cargo's directory"

# 2. Cargo's directory has no coldcache: a clear stop, before compiling anything.
rm "$work/target dir/release/coldcache"
rc=0
env -u COLDCACHE PATH="$work/fakebin:$PATH" scripts/demo.sh "$work/out2" >/dev/null 2>"$work/stderr2" || rc=$?
[ "$rc" = 1 ] || fail "a missing binary gave exit $rc (want 1): $(cat "$work/stderr2")"
grep -qF "not at $work/target dir/release/coldcache" "$work/stderr2" || fail "no path in: $(cat "$work/stderr2")"
[ ! -e "$work/out2/pushbuffer" ] || fail "went on after the missing binary"

# 3. release-dir.sh adds CARGO_BUILD_TARGET's triple.
got=$(PATH="$work/fakebin:$PATH" CARGO_BUILD_TARGET=x86_64-unknown-linux-gnu scripts/release-dir.sh)
[ "$got" = "$work/target dir/x86_64-unknown-linux-gnu/release" ] || fail "release-dir.sh with a triple: $got"
echo "demo-test: ok"
