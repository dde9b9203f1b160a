#!/usr/bin/env bash
# The preloaded library links no parser of configuration or trace files, nor
# the DWARF readers of the symbols and data views (coldcache-symbols, -types)
# (ARCHITECTURE.md's invariants; crates/libcoldcache/src/lib.rs): fails if
# any crate of those parsers is in libcoldcache's normal dependency tree. Cargo unifies features across a
# build, so this is checked on the dependency graph, not behind a feature.
set -euo pipefail
cd "$(dirname "$0")/.."
forbidden='^(toml|toml_[a-z_]+|winnow|serde_spanned|serde_path_to_error|flate2|miniz_oxide|adler2|simd-adler32|ruzstd|twox-hash|coldcache-trace|coldcache-config|coldcache-types|coldcache-symbols)$'
crates=$(cargo tree -p libcoldcache -e normal --prefix none | awk '{print $1}' | sort -u)
bad=$(grep -E "$forbidden" <<<"$crates" || true)
if [ -n "$bad" ]; then
  echo "libcoldcache links file parsers it must not: $(tr '\n' ' ' <<<"$bad")" >&2
  exit 1
fi
echo "libcoldcache: $(wc -l <<<"$crates") crates in its normal dependency tree, no file parser"
