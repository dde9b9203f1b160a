/* CALLGRIND_DUMP_STATS and CALLGRIND_DUMP_STATS_AT cut the profile into
 * parts: `first` before the first dump, `second` between the two, `third`
 * after them (in the last part, written at the program's end). Under
 * Callgrind the parts are FILE.1, FILE.2 and FILE; natively the requests
 * do nothing. `./dumps [N]` (default 500). */
#include <stdio.h>
#include <stdlib.h>
#include <valgrind/callgrind.h>

__attribute__((noinline)) long first(long n) {
    long s = 0;
    for (long i = 0; i < n; i++)
        s += i * i;
    return s;
}
__attribute__((noinline)) long second(long n) {
    long s = 0;
    for (long i = 0; i < n; i++)
        s ^= i * 7;
    return s;
}
__attribute__((noinline)) long third(long n) {
    long s = 1;
    for (long i = 0; i < n; i++)
        s += s >> 3;
    return s;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 500;
    long s = first(n);
    CALLGRIND_DUMP_STATS;
    s += second(2 * n);
    CALLGRIND_DUMP_STATS_AT("after second");
    s += third(3 * n);
    printf("sum %ld\n", s);
    return 0;
}
