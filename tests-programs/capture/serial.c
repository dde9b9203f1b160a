/* serial.c - four threads each sum their own slice of an array into a
 * counter of their own (the four counters share one cache line), then
 * main joins them: deterministic work whose simulated misses depend on how
 * the threads interleave. Captured with the C API from before the threads
 * are created to after they are joined, every thread traced.
 *
 * Usage: serial [DUMP]   (default serial.ccdump). Prints the total.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include "coldcache.h"

#define THREADS 4
#define SLICE 4096

static uint64_t data[THREADS * SLICE];
static volatile uint64_t sums[THREADS] __attribute__((aligned(64)));

static void *worker(void *arg) {
    int id = (int)(intptr_t)arg;
    for (int i = id * SLICE; i < (id + 1) * SLICE; i++) sums[id] += data[i];
    return NULL;
}

int main(int argc, char **argv) {
    for (int i = 0; i < THREADS * SLICE; i++) data[i] = (uint64_t)i * 3;
    struct coldcache_options o;
    coldcache_options_init(&o);
    o.threads = COLDCACHE_THREADS_ALL;
    o.output = argc > 1 ? argv[1] : "serial.ccdump";
    if (coldcache_start(&o) != 0) {
        fprintf(stderr, "start: %s\n", coldcache_last_error());
        return 1;
    }
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    coldcache_stop();
    uint64_t total = 0;
    for (int i = 0; i < THREADS; i++) total += sums[i];
    printf("%llu\n", (unsigned long long)total);
    return 0;
}
