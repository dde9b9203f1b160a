/* A benchmark-like program for `coldcache valgrind` (crates/cli/tests/valgrind.rs):
 * main calls `bench` three times (the function a harness's --toggle-collect
 * names), which calls `helper`; `setup` runs outside it. No libc call inside
 * bench, so its instruction counts cannot depend on glibc's CPU dispatch or
 * Valgrind's replacement functions. Prints a checksum and exits with
 * argv[1] (default 0). noipa: GCC would otherwise fold the three calls of the
 * pure bench into one. */
#include <stdio.h>
#include <stdlib.h>

static long table[4096];

__attribute__((noipa)) long helper(long i) {
    return table[(i * 7) & 4095] + i;
}

__attribute__((noipa)) long bench(int n) {
    long s = 0;
    for (int i = 0; i < n; i++)
        s += helper(i);
    return s;
}

__attribute__((noipa)) void setup(void) {
    for (int i = 0; i < 4096; i++)
        table[i] = i * 3;
}

int main(int argc, char **argv) {
    setup();
    long s = 0;
    for (int r = 0; r < 3; r++)
        s += bench(10000);
    printf("checksum %ld\n", s);
    fprintf(stderr, "to stderr\n");
    return argc > 1 ? atoi(argv[1]) : 0;
}
