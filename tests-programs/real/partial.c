/* partial.c - GCC -O2 splits `lookup` (partial inlining): a small header
 * (the early return), which main inlines, and `lookup.part.0`, the body,
 * which main calls directly: `lookup`'s own entry never runs.
 * crates/cli/tests/names.rs checks that `record --function lookup` says
 * so and names the copy, that `--function lookup.part.0` counts what
 * Callgrind counts, and that the copy's costs are `lookup`'s in the report.
 *
 * Usage: partial [N]   (lookups of keys -3 .. N+1; default 2)
 */
#include <stdio.h>
#include <stdlib.h>

long table[4096];

long lookup(int k) {
    if (__builtin_expect(k < 0, 1))
        return -1;
    long s = 0;
    for (int i = 0; i < 4096; i += 7) s += table[(i * k) & 4095] * i;
    for (int i = 0; i < 4096; i += 5) s ^= table[(i + k) & 4095] >> 3;
    for (int i = 0; i < 4096; i += 3) s -= table[(i ^ k) & 4095] / (i + 1);
    return s;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 2;
    long t = 0;
    for (int i = 0; i < 4096; i++) table[i] = i * 31 % 97;
    for (int k = -3; k < n + 2; k++) t += lookup(k);
    printf("%ld\n", t);
    return 0;
}
