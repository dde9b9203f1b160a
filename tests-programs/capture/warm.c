/* warm.c - a frame function that reads a buffer which fits the cache, called
 * CALLS times: the program of the warm-cache tests (issue 18). The buffer is
 * 16 KiB, 64-byte aligned: 256 lines of 64 bytes, 2,048 eight-byte reads a
 * call. From a cold cache a call misses once per line; on the cache an
 * earlier call left (a 32 KiB L1 holds it), it misses nowhere.
 *
 * Usage: warm [CALLS]   (default 3). Prints the sum of every call's sum.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define BYTES 16384
#define N (BYTES / 8)

static uint64_t buf[N] __attribute__((aligned(64)));

__attribute__((noinline)) uint64_t touch(void) {
    uint64_t s = 0;
    for (int i = 0; i < N; i++) s += buf[i];
    return s;
}

int main(int argc, char **argv) {
    int calls = argc > 1 ? atoi(argv[1]) : 3;
    for (int i = 0; i < N; i++) buf[i] = (uint64_t)i;
    uint64_t total = 0;
    for (int c = 0; c < calls; c++) {
        buf[c] += 1;
        total += touch();
    }
    printf("%llu\n", (unsigned long long)total);
    return 0;
}
