/* threads.c - capture stress program: 8 threads with a mutex, a condition
 * variable and atomics, threads created and exiting while a capture of all
 * threads is running, captured CAPTURES times in a row.
 *
 * Usage: threads MODE [CAPTURES [DUMP [TRACE]]]   MODE = plain | coldcache
 * (TRACE: also keep every access in this cctrace file)
 * Prints the same deterministic totals in both modes.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "coldcache.h"

#define WORKERS 4
#define EXTRA 4

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t go = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done = PTHREAD_COND_INITIALIZER;
static int round_no, finished, quit;
static uint64_t shared_sum;
static atomic_uint_fast64_t atomic_sum;
static uint64_t slots[WORKERS + EXTRA][8]; /* one cache line each: no false sharing */

static void work(int id, int r) {
    uint64_t s = 0;
    for (int i = 0; i < 50; i++) s += (uint64_t)(i * (id + 1) + r);
    slots[id][0] += s;
    atomic_fetch_add(&atomic_sum, s);
    pthread_mutex_lock(&lock);
    shared_sum += s;
    pthread_mutex_unlock(&lock);
}

static void *worker(void *arg) {
    int id = (int)(intptr_t)arg, seen = 0;
    for (;;) {
        pthread_mutex_lock(&lock);
        while (round_no == seen && !quit) pthread_cond_wait(&go, &lock);
        if (quit) { pthread_mutex_unlock(&lock); return NULL; }
        seen = round_no;
        pthread_mutex_unlock(&lock);
        work(id, seen);
        pthread_mutex_lock(&lock);
        finished++;
        pthread_cond_signal(&done);
        pthread_mutex_unlock(&lock);
    }
}

static void *short_lived(void *arg) {
    work((int)(intptr_t)arg, 7);
    return NULL;
}

int main(int argc, char **argv) {
    int capture = argc > 1 && strcmp(argv[1], "coldcache") == 0;
    int captures = argc > 2 ? atoi(argv[2]) : 100;
    pthread_t w[WORKERS];
    for (int i = 0; i < WORKERS; i++) pthread_create(&w[i], NULL, worker, (void *)(intptr_t)i);
    struct coldcache_options o;
    coldcache_options_init(&o);
    o.threads = COLDCACHE_THREADS_ALL;
    o.cache = "jaguar";
    o.output = argc > 3 ? argv[3] : "threads.ccdump";
    o.trace = argc > 4 ? argv[4] : NULL;
    int failures = 0;
    for (int c = 0; c < captures; c++) {
        if (capture && coldcache_start(&o) != 0) { failures++; fprintf(stderr, "start: %s\n", coldcache_last_error()); }
        /* a round for the workers */
        pthread_mutex_lock(&lock);
        finished = 0;
        round_no++;
        pthread_cond_broadcast(&go);
        pthread_mutex_unlock(&lock);
        /* every 10th capture, threads are created and exit inside it */
        if (c % 10 == 0) {
            pthread_t t[EXTRA];
            for (int i = 0; i < EXTRA; i++) pthread_create(&t[i], NULL, short_lived, (void *)(intptr_t)(WORKERS + i));
            for (int i = 0; i < EXTRA; i++) pthread_join(t[i], NULL);
        }
        pthread_mutex_lock(&lock);
        while (finished < WORKERS) pthread_cond_wait(&done, &lock);
        pthread_mutex_unlock(&lock);
        if (capture && coldcache_stop() != 0) { failures++; fprintf(stderr, "stop: %s\n", coldcache_last_error()); }
    }
    pthread_mutex_lock(&lock);
    quit = 1;
    pthread_cond_broadcast(&go);
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < WORKERS; i++) pthread_join(w[i], NULL);
    uint64_t per = 0;
    for (int i = 0; i < WORKERS + EXTRA; i++) per += slots[i][0];
    printf("captures %d shared %llu atomic %llu slots %llu failures %d\n", captures,
           (unsigned long long)shared_sum, (unsigned long long)atomic_load(&atomic_sum),
           (unsigned long long)per, failures);
    return failures != 0;
}
