/* window_threads.c - the main thread calls `frame` while three worker
 * threads (named "worker") run `spin` at the same time: a barrier inside
 * `frame` releases them, and `frame` returns only after each has spun at
 * least MIN_SPINS times, so they certainly run during its window. After
 * `frame` returned, a second barrier lets each worker run `late` (work
 * that lies outside the window). `work` is the caller's deterministic
 * part of the window.
 *
 * Usage: window_threads. Prints the sums of `work` and of `late`.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

#define WORKERS 3
#define MIN_SPINS 1000

static pthread_barrier_t start, after;
static volatile int done;
static volatile unsigned long spins[WORKERS][8] __attribute__((aligned(64)));
static volatile unsigned long late_sum[WORKERS][8] __attribute__((aligned(64)));
static unsigned long data[4096];
static volatile unsigned long work_sum;

__attribute__((noinline)) void spin(int id) {
    while (!done) spins[id][0]++;
}

__attribute__((noinline)) void late(int id) {
    unsigned long s = 0;
    for (unsigned long i = 0; i < 20000; i++) s += i * (unsigned long)(id + 1);
    late_sum[id][0] = s;
}

__attribute__((noinline)) void work(void) {
    unsigned long s = 0;
    for (int i = 0; i < 4096; i++) s += data[i] ^ (unsigned long)i;
    work_sum = s;
}

__attribute__((noinline)) void wait_workers(void) {
    for (int id = 0; id < WORKERS; id++)
        while (spins[id][0] < MIN_SPINS) sched_yield();
}

__attribute__((noinline)) void frame(void) {
    pthread_barrier_wait(&start);
    work();
    wait_workers();
    done = 1;
}

static void *worker(void *arg) {
    int id = (int)(long)arg;
    pthread_barrier_wait(&start);
    spin(id);
    pthread_barrier_wait(&after);
    late(id);
    return NULL;
}

int main(void) {
    for (int i = 0; i < 4096; i++) data[i] = (unsigned long)i * 7;
    pthread_barrier_init(&start, NULL, WORKERS + 1);
    pthread_barrier_init(&after, NULL, WORKERS + 1);
    pthread_t t[WORKERS];
    for (long i = 0; i < WORKERS; i++) {
        pthread_create(&t[i], NULL, worker, (void *)i);
        /* Named by the creator, so the name is there before `frame`. */
        pthread_setname_np(t[i], "worker");
    }
    frame();
    pthread_barrier_wait(&after);
    for (int i = 0; i < WORKERS; i++) pthread_join(t[i], NULL);
    unsigned long l = 0;
    for (int i = 0; i < WORKERS; i++) l += late_sum[i][0];
    printf("work %lu late %lu\n", work_sum, l);
    return 0;
}
