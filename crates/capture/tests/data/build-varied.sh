#!/bin/sh
# Rebuilds NAME.txt from NAME.s with GNU binutils (as, objdump); NAME is
# the first argument, `varied` by default (`difftest` for the translator's
# differential test). Each line of NAME.txt: the instruction's bytes in hex,
# " | ", its disassembly (Intel syntax).
set -eu
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
name=${1:-varied}
as --64 -o "$tmp/$name.o" "$name.s"
objdump -d -M intel --insn-width=16 "$tmp/$name.o" \
  | awk -F'\t' 'NF >= 3 && $1 ~ /^ *[0-9a-f]+:$/ { gsub(/ +$/, "", $2); gsub(/ +$/, "", $3); print $2 " | " $3 }' \
  > "$name.txt"
