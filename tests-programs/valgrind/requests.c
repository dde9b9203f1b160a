/* Valgrind's client requests (callgrind.h), each kind in turn, around
 * four functions of known work: `setup` runs before instrumentation
 * starts, `measured` while it is on and collecting, `hidden` between two
 * TOGGLE_COLLECTs (collection off), `discarded` before a ZERO_STATS (so
 * none of it stays), `last` after it. Under Callgrind with
 * `--instr-atstart=no` only `measured` and `last` have counts; natively
 * the requests do nothing and the program prints the same sum.
 * `./requests [N]` (default 1000). */
#include <stdio.h>
#include <stdlib.h>
#include <valgrind/callgrind.h>

static volatile long sink;

__attribute__((noinline)) static long work(const long *a, long n, long k) {
    long s = 0;
    for (long i = 0; i < n; i++)
        s += a[(i * k) % n];
    return s;
}
__attribute__((noinline)) long setup(const long *a, long n) { return work(a, n, 3); }
__attribute__((noinline)) long measured(const long *a, long n) { return work(a, n, 5); }
__attribute__((noinline)) long hidden(const long *a, long n) { return work(a, n, 7); }
__attribute__((noinline)) long discarded(const long *a, long n) { return work(a, n, 11); }
__attribute__((noinline)) long last(const long *a, long n) { return work(a, n, 13); }

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000;
    long *a = malloc(n * sizeof *a);
    for (long i = 0; i < n; i++)
        a[i] = i * 2654435761u % 1000;
    long s = setup(a, n);
    CALLGRIND_START_INSTRUMENTATION;
    s += discarded(a, n);
    CALLGRIND_ZERO_STATS;
    s += measured(a, n);
    CALLGRIND_TOGGLE_COLLECT;
    s += hidden(a, n);
    CALLGRIND_TOGGLE_COLLECT;
    CALLGRIND_STOP_INSTRUMENTATION;
    s += setup(a, n);
    CALLGRIND_START_INSTRUMENTATION;
    s += last(a, n);
    sink = s;
    printf("sum %ld\n", s);
    free(a);
    return 0;
}
