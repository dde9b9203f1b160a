#!/usr/bin/env bash
# Prints the directory where `cargo build --release` puts this workspace's
# binaries (coldcache, libcoldcache.so, examples/): cargo's own answer
# (`cargo metadata`'s target_directory, which follows CARGO_TARGET_DIR,
# CARGO_BUILD_TARGET_DIR and .cargo/config.toml's build.target-dir), then
# `/<triple>` when CARGO_BUILD_TARGET is set, then `/release`. The
# scripts here use it instead of assuming `target/release`; so can you:
#
#   export PATH="$(scripts/release-dir.sh):$PATH"
#
# Needs cargo and python3 (to read cargo's JSON); reads no dependency (--no-deps).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
[ -n "$dir" ] || { echo "release-dir.sh: cargo metadata gave no target_directory" >&2; exit 1; }
[ -z "${CARGO_BUILD_TARGET:-}" ] || dir="$dir/$CARGO_BUILD_TARGET"
printf '%s/release\n' "$dir"
