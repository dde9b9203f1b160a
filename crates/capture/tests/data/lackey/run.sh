#!/bin/sh
# Rebuilds probe.lackey.txt from probe.s with GNU binutils and Valgrind.
set -eu
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
as --64 -o "$tmp/probe.o" probe.s
ld -o "$tmp/probe" "$tmp/probe.o"
nm "$tmp/probe" | awk '$3 ~ /^i_/ { print $1, $3 }' > "$tmp/labels"
valgrind --tool=lackey --trace-mem=yes --log-file="$tmp/lackey" "$tmp/probe"
{
  echo "# $(valgrind --version): labelled instructions of probe.s and their lackey records."
  echo "# Addresses: buf+2048 is the data buffer, 1fff... is the stack."
  awk 'NR == FNR { label[$1] = $2; next }
       /^==/ { next }
       $1 == "I" { split($2, a, ","); addr = sprintf("%016s", a[1]); gsub(/ /, "0", addr);
                   cur = (addr in label) ? label[addr] : ""; if (cur != "") print cur; next }
       cur != "" && NF { print "    " $0 }' "$tmp/labels" "$tmp/lackey"
} > probe.lackey.txt
