#!/bin/sh
# Copies the cache description of this machine's CPUs from sysfs into a
# fixture directory laid out like /sys/devices/system/cpu, for the tests of
# coldcache-config's `host` preset:
#   crates/config/tests/data/capture-sysfs.sh crates/config/tests/data/sysfs-NAME
set -eu
src=${SYSFS_CPU_ROOT:-/sys/devices/system/cpu}
out=${1:?usage: capture-sysfs.sh OUTDIR}
mkdir -p "$out"
for cpu in "$src"/cpu[0-9]*; do
    [ -d "$cpu/cache" ] || continue
    for idx in "$cpu"/cache/index[0-9]*; do
        dest="$out/$(basename "$cpu")/cache/$(basename "$idx")"
        mkdir -p "$dest"
        for f in level type size ways_of_associativity coherency_line_size \
                 number_of_sets shared_cpu_list shared_cpu_map \
                 physical_line_partition id; do
            if [ -r "$idx/$f" ]; then
                cat "$idx/$f" > "$dest/$f"
            fi
        done
    done
done
for f in online possible present; do
    [ -r "$src/$f" ] && cat "$src/$f" > "$out/$f"
done
echo "captured $(ls -d "$out"/cpu[0-9]* | wc -l) CPUs into $out"
