/* Four threads, each adding into an array of its own in thread-local
 * storage (`__thread`, addressed through FS) for ROUNDS rounds, then
 * printing the sum of all: the same instructions in every run, split
 * evenly, and no cache line written by two threads.
 *
 * Used by `crates/cli/tests/fast.rs`
 * (`buffers_handed_over_between_threads_are_each_counted_once`): records a
 * thread hands over to another (`jit/handed.rs`) must be replayed with
 * their own thread's FS base; with the replaying thread's, the arrays
 * would seem shared and coherence invalidations would show. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 4
#define WORDS 512

static __thread long acc[WORDS] __attribute__((aligned(64)));
static int rounds;
static long sums[THREADS];

static void *work(void *arg) {
    long k = (long)arg;
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < WORDS; i++)
            acc[i] += (long)i * r + k;
    long s = 0;
    for (int i = 0; i < WORDS; i++) s += acc[i];
    sums[k] = s;
    return NULL;
}

int main(int argc, char **argv) {
    rounds = argc > 1 ? atoi(argv[1]) : 200;
    pthread_t t[THREADS];
    for (long k = 0; k < THREADS; k++) pthread_create(&t[k], NULL, work, (void *)k);
    long total = 0;
    for (int k = 0; k < THREADS; k++) {
        pthread_join(t[k], NULL);
        total += sums[k];
    }
    printf("total %ld\n", total);
    return 0;
}
