/* false_sharing.c - four threads each bump their own counter ITERS times.
 * Unpadded, the counters share one cache line (false sharing: every write
 * invalidates the other cores' copies); padded, each has a line of its own.
 *
 * Usage: false_sharing packed|padded [ITERS]
 * Capture with: coldcache record --function run --threads all --cache jaguar
 * Prints the counters' sum (ITERS * 4), the same in every run.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4

struct packed { volatile uint64_t n[THREADS]; };
struct padded { struct { volatile uint64_t n; char pad[56]; } c[THREADS]; };

static struct packed packed __attribute__((aligned(64)));
static struct padded padded __attribute__((aligned(64)));
static long iters = 200000;
static int use_padded;
static pthread_barrier_t start;

static void *bump(void *arg) {
    int id = (int)(intptr_t)arg;
    volatile uint64_t *n = use_padded ? &padded.c[id].n : &packed.n[id];
    pthread_barrier_wait(&start);
    for (long i = 0; i < iters; i++) *n += 1;
    return NULL;
}

/* The captured window: start the threads, let them run, join them. */
__attribute__((noinline)) uint64_t run(void) {
    pthread_t t[THREADS];
    pthread_barrier_init(&start, NULL, THREADS);
    for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, bump, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    uint64_t sum = 0;
    for (int i = 0; i < THREADS; i++) sum += use_padded ? padded.c[i].n : packed.n[i];
    return sum;
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "packed") && strcmp(argv[1], "padded"))) {
        fprintf(stderr, "usage: false_sharing packed|padded [ITERS]\n");
        return 2;
    }
    use_padded = strcmp(argv[1], "padded") == 0;
    if (argc > 2) iters = atol(argv[2]);
    printf("sum %llu\n", (unsigned long long)run());
    return 0;
}
