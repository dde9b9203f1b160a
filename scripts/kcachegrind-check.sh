#!/usr/bin/env bash
# The KCachegrind check of the Callgrind export (docs/export.md): capture the
# CacheSim talk's getter example, export it, open it in KCachegrind under
# Xvfb, select SceneObject::GetPosition, show its Machine Code, switch the
# event to KCachegrind's derived `LLm` (ILmr + DLmr + DLmw: the accesses
# served by memory, coldcache's `mem`) and take a screenshot. Not run by CI (needs kcachegrind,
# xvfb, xdotool, imagemagick: apt-get install kcachegrind xvfb xdotool
# imagemagick dbus).
#
#   scripts/kcachegrind-check.sh [OUTDIR]     (default: target/kcachegrind)
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(realpath -m "${1:-target/kcachegrind}")"
mkdir -p "$out"
cargo build --release -p coldcache-cli -p libcoldcache
cc="$(scripts/release-dir.sh)/coldcache"

g++ -O1 -g -o "$out/getposition" examples/programs/getposition.cpp
"$cc" record --cache examples/caches/talk-scaled.toml --function frame \
    -o "$out/getposition.ccdump" -- "$out/getposition"
"$cc" export "$out/getposition.ccdump" --format callgrind -o "$out/getposition.callgrind"
callgrind_annotate "$out/getposition.callgrind" > "$out/annotate.txt"

# No "tip of the day" dialog over the window.
mkdir -p "$HOME/.config"
grep -qs RunOnStart "$HOME/.config/kcachegrindrc" ||
    printf '[TipOfDay]\nRunOnStart=false\n' >> "$HOME/.config/kcachegrindrc"

cat > "$out/inside-xvfb.sh" <<'INNER'
#!/usr/bin/env bash
cd "$1"
dbus-run-session -- kcachegrind -geometry 1390x890+0+0 getposition.callgrind > kcachegrind.log 2>&1 &
k=$!
sleep 10
xdotool mousemove 128 89 click 1          # the flat profile's search field
sleep 0.5
xdotool type "GetPosition"
sleep 1
xdotool key Down Return                   # select the getter
sleep 1
xdotool mousemove 815 846 click 1         # Machine Code tab
sleep 3
xdotool mousemove 900 38 click 1          # event list: ... L1m, LLm, CEst (derived)
sleep 1
xdotool key End Up Return                 # LLm = ILmr + DLmr + DLmw (coldcache's mem)
sleep 3
import -window root kcachegrind.png
kill "$k" 2>/dev/null || true
INNER
chmod +x "$out/inside-xvfb.sh"
xvfb-run -a -s "-screen 0 1400x900x24" "$out/inside-xvfb.sh" "$out"
echo "screenshot: $out/kcachegrind.png (objdump calls in $out/kcachegrind.log)"
