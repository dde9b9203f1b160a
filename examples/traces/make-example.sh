#!/bin/sh
# Rebuilds examples/traces/example.lackey.gz, the memory trace of
# examples/programs/example.c used by the README's first command.
#
#   sh examples/traces/make-example.sh            # the program as shipped
#   FIXED=1 sh examples/traces/make-example.sh    # the fixed layout, written to
#                                                 # example-fixed.lackey.gz
#   CG="--I1=32768,8,64 --D1=32768,8,64 --LL=8388608,16,64" \
#       sh examples/traces/make-example.sh        # also run cachegrind on the
#                                                 # same binary, same way, and
#                                                 # print its summary
#
# The bundled trace was made with gcc 12.2.0, glibc 2.36 and valgrind 3.19.0
# (Debian 12, x86-64). Other versions give a trace of the same program with
# different startup code and addresses.
#
# What has to be the same for two Valgrind runs to see the same addresses
# (for instance lackey here and cachegrind for comparison):
# - the binary, built -fno-pie -no-pie (fixed addresses for the program;
#   Valgrind places the stack, heap and libraries deterministically);
# - the executable's absolute path, or at least its length: Valgrind puts it
#   on the client's initial stack, so a longer directory name shifts every
#   stack address. Hence the fixed build directory below;
# - argv (./example) and the environment (env -i: the environment is on the
#   initial stack too, the dynamic loader scans it, and it keeps
#   VALGRIND_OPTS out);
# - where stdout goes (/dev/null here): glibc's stdio takes different paths
#   for a terminal, a pipe or a file.
# gzip -9 -n stores no file name or time stamp. The trace keeps lackey's own
# "==PID==" header and footer lines, so its bytes still vary in the PID.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
src="$here/../programs/example.c"
name=example
cflags="-O1 -g -fno-pie -no-pie"
if [ "${FIXED:-}" = 1 ]; then
    name=example-fixed
    cflags="$cflags -DFIXED"
fi

work=/tmp/coldcache-example
rm -rf "$work"
mkdir -p "$work"

# shellcheck disable=SC2086 # $cflags is a list of flags
gcc $cflags -o "$work/example" "$src"
cd "$work"
env -i valgrind --tool=lackey --trace-mem=yes --log-file=trace.lackey ./example >/dev/null
gzip -9 -n -c trace.lackey >"$here/$name.lackey.gz"
records=$(grep -vc '^==' trace.lackey)
bytes=$(wc -c <"$here/$name.lackey.gz")
echo "wrote $here/$name.lackey.gz: $records records, $bytes bytes compressed"

if [ -n "${CG:-}" ]; then
    # shellcheck disable=SC2086 # $CG is a list of options
    env -i valgrind --tool=cachegrind --cache-sim=yes $CG \
        --cachegrind-out-file=cachegrind.out ./example >/dev/null 2>cachegrind.log
    grep -E '^(desc|events|summary):' cachegrind.out
fi
cd /
rm -rf "$work"
