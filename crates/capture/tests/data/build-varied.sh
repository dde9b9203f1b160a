#!/bin/sh
# Rebuilds varied.txt from varied.s with GNU binutils (as, objdump).
# Each line of varied.txt: the instruction's bytes in hex, " | ", its
# disassembly (Intel syntax).
set -eu
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
as --64 -o "$tmp/varied.o" varied.s
objdump -d -M intel --insn-width=16 "$tmp/varied.o" \
  | awk -F'\t' 'NF >= 3 && $1 ~ /^ *[0-9a-f]+:$/ { gsub(/ +$/, "", $2); gsub(/ +$/, "", $3); print $2 " | " $3 }' \
  > varied.txt
