/* Four threads hand a counter round under one mutex and two condition
 * variables, ROUNDS turns each (default 20,000): most of their time is in
 * futex system calls (issue 31's mutex/condvar program).
 * `./mutex [ROUNDS]`; prints the final counter and a checksum, the same
 * in every run. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum { THREADS = 4 };
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn_changed = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static long turn, counter, rounds, finished;
static unsigned long checksum;

static void *worker(void *arg) {
    long me = (long)arg;
    for (long r = 0; r < rounds; r++) {
        pthread_mutex_lock(&lock);
        while (turn % THREADS != me)
            pthread_cond_wait(&turn_changed, &lock);
        counter += me + 1;
        checksum = checksum * 31 + (unsigned long)counter;
        turn++;
        pthread_cond_broadcast(&turn_changed);
        pthread_mutex_unlock(&lock);
    }
    pthread_mutex_lock(&lock);
    finished++;
    pthread_cond_signal(&done_cond);
    pthread_mutex_unlock(&lock);
    return 0;
}

int main(int argc, char **argv) {
    rounds = argc > 1 ? atol(argv[1]) : 20000;
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], 0, worker, (void *)i);
    pthread_mutex_lock(&lock);
    while (finished < THREADS)
        pthread_cond_wait(&done_cond, &lock);
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], 0);
    printf("counter %ld checksum %lu\n", counter, checksum);
    return 0;
}
