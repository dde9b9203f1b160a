#!/usr/bin/env bash
# End-to-end tests of `coldcache ui` in a real browser: Debian's chromium
# driven by playwright-core (ui-tests/). Installs both when missing, records
# the pushbuffer example before and after its fix (scripts/demo.sh), serves
# the two dumps, runs ui-tests/e2e.mjs, and stops the server with SIGINT
# (it must stop cleanly); then ui-tests/mismatch.mjs on two dumps simulated
# with different caches, ui-tests/hostile.mjs on a hostile dump, and
# ui-tests/data.mjs (the Data tab) on a dump with data types of
# tests-programs/data/entities.cpp (and its Objects table on
# tests-programs/data/objects.cpp recorded with --objects), and ui-tests/trees.mjs (issue 36's
# trees and pages) on two captures of tests-programs/symbols/
# inlined_getter.cpp. Screenshots: target/ui-screenshots/.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/ui-tests-install.sh

# Where cargo put the binaries (CARGO_TARGET_DIR is followed); COLDCACHE
# overrides, for demo.sh too.
rel=$(scripts/release-dir.sh)
cc=${COLDCACHE:-$rel/coldcache}
scripts/demo.sh target/demo >/dev/null
shots=target/ui-screenshots
rm -rf "$shots"; mkdir -p "$shots"
log=target/ui-server.log
# --whole-stack: the trees from _start (main above run_frames, whose own
# cost is a collapsed second root of the bottom-up); trees.mjs checks the
# default, rooted trees.
"$cc" ui --whole-stack target/demo/before.ccdump target/demo/after.ccdump >"$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do grep -q "token=" "$log" && break; sleep 0.1; done
url=$(grep -o 'http://[^ ]*token=[0-9a-f]*' "$log")
echo "== server at $url"
COLDCACHE_UI_URL="$url" SCREENSHOTS="$shots" COLDCACHE_BIN="$cc" \
  DUMP_A=target/demo/before.ccdump DUMP_B=target/demo/after.ccdump node ui-tests/e2e.mjs
kill -INT $server
for _ in $(seq 1 50); do kill -0 $server 2>/dev/null || break; sleep 0.1; done
if kill -0 $server 2>/dev/null; then echo "the server did not stop on SIGINT" >&2; exit 1; fi
wait $server || { echo "the server exited with an error" >&2; cat "$log" >&2; exit 1; }
grep -q "coldcache ui: stopped" "$log"

# Two dumps simulated with different caches (the fixed build on another
# cache): the page warns as `coldcache diff` does.
mismatch=target/ui-mismatch
rm -rf "$mismatch"; mkdir -p "$mismatch"
"$cc" record --cache examples/caches/small-2level.toml --function run_frames \
  -o "$mismatch/other-cache.ccdump" -- target/demo/pushbuffer-fixed >/dev/null 2>&1
"$cc" ui target/demo/before.ccdump "$mismatch/other-cache.ccdump" >"$log" 2>&1 &
server=$!
for _ in $(seq 1 100); do grep -q "token=" "$log" && break; sleep 0.1; done
url=$(grep -o 'http://[^ ]*token=[0-9a-f]*' "$log")
COLDCACHE_UI_URL="$url" SCREENSHOTS="$shots" COLDCACHE_BIN="$cc" \
  DUMP_A=target/demo/before.ccdump DUMP_B="$mismatch/other-cache.ccdump" node ui-tests/mismatch.mjs
kill -INT $server
wait $server || { echo "the server exited with an error" >&2; cat "$log" >&2; exit 1; }

# A hostile dump (HTML in every string, and in the second dump's file name):
# shown as text, nothing runs.
hostile=target/ui-hostile
rm -rf "$hostile"; mkdir -p "$hostile"
# --workspace (not -p coldcache-ui): the features the README test command
# built with, so CI compiles nothing again (-p rebuilt about 1.5 minutes).
cargo build --release -q --workspace --example hostile_dump
"$rel/examples/hostile_dump" "$hostile/a.ccdump"
cp "$hostile/a.ccdump" "$hostile/b<img src=x onerror=\"window.__xss=1\">.ccdump"
"$cc" ui "$hostile"/a.ccdump "$hostile"/b*.ccdump >"$log" 2>&1 &
server=$!
for _ in $(seq 1 100); do grep -q "token=" "$log" && break; sleep 0.1; done
url=$(grep -o 'http://[^ ]*token=[0-9a-f]*' "$log")
COLDCACHE_UI_URL="$url" SCREENSHOTS="$shots" node ui-tests/hostile.mjs
kill -INT $server
wait $server || { echo "the server exited with an error" >&2; cat "$log" >&2; exit 1; }
# The Data tab: a dump with data types (the talk's flag in a cold line,
# g++ -g -O2), its coverage, fields and layout as the CLI gives them.
datadir=target/ui-data
rm -rf "$datadir"; mkdir -p "$datadir"
g++ -g -O2 -o "$datadir/entities" tests-programs/data/entities.cpp
"$cc" record --no-progress --line-use --function game::frame -o "$datadir/entities.ccdump" -- "$datadir/entities" >/dev/null 2>&1
"$cc" ui "$datadir/entities.ccdump" >"$log" 2>&1 &
server=$!
for _ in $(seq 1 100); do grep -q "token=" "$log" && break; sleep 0.1; done
url=$(grep -o 'http://[^ ]*token=[0-9a-f]*' "$log")
# And the Objects table: objects.cpp's getposition (the talk's 12,000
# objects) recorded with --objects, on a second server.
g++ -g -O1 -Wl,-z,relro,-z,now -o "$datadir/objects" tests-programs/data/objects.cpp
LD_BIND_NOW=1 "$cc" record --no-progress --objects --function getposition -o "$datadir/objects.ccdump" -- "$datadir/objects" getposition >/dev/null 2>&1
olog=target/ui-server-objects.log
"$cc" ui "$datadir/objects.ccdump" >"$olog" 2>&1 &
oserver=$!
for _ in $(seq 1 100); do grep -q "token=" "$olog" && break; sleep 0.1; done
ourl=$(grep -o 'http://[^ ]*token=[0-9a-f]*' "$olog")
COLDCACHE_UI_URL="$url" SCREENSHOTS="$shots" COLDCACHE_BIN="$cc" \
  DUMP="$datadir/entities.ccdump" OBJECTS_URL="$ourl" OBJECTS_DUMP="$datadir/objects.ccdump" node ui-tests/data.mjs
kill -INT $server $oserver
wait $server || { echo "the server exited with an error" >&2; cat "$log" >&2; exit 1; }
wait $oserver || { echo "the objects server exited with an error" >&2; cat "$olog" >&2; exit 1; }
# The trees a new user reads (ui-tests/trees.mjs): a getter inlined into
# one caller and called by another, two captures served together.
treedir=target/ui-trees
rm -rf "$treedir"; mkdir -p "$treedir"
g++ -g -O2 -o "$treedir/inlined_getter" tests-programs/symbols/inlined_getter.cpp
for d in a b; do
  "$cc" record --no-progress --function frame -o "$treedir/$d.ccdump" -- "$treedir/inlined_getter" >/dev/null 2>&1
done
"$cc" ui "$treedir/a.ccdump" "$treedir/b.ccdump" >"$log" 2>&1 &
server=$!
for _ in $(seq 1 100); do grep -q "token=" "$log" && break; sleep 0.1; done
url=$(grep -o 'http://[^ ]*token=[0-9a-f]*' "$log")
COLDCACHE_UI_URL="$url" SCREENSHOTS="$shots" COLDCACHE_BIN="$cc" \
  DUMP_A="$treedir/a.ccdump" DUMP_B="$treedir/b.ccdump" node ui-tests/trees.mjs
kill -INT $server
wait $server || { echo "the server exited with an error" >&2; cat "$log" >&2; exit 1; }
echo "== ui tests passed; screenshots in $shots"
