/* Four threads passing work through a queue guarded by a mutex and two
 * condition variables: main produces ITEMS items, three workers consume
 * them (each item is a small sum over a shared table), then main joins
 * them. A capture of `main` (`record --all --threads all`) must follow
 * every thread to the end of the window: the printed totals are the
 * check that nothing changed. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define ITEMS 20000
#define QUEUE 16
#define WORKERS 3

static int queue[QUEUE];
static int head, tail, count, done;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static long table[4096];
static long totals[WORKERS];

__attribute__((noinline)) static long work(int item) {
    long s = 0;
    for (int k = 0; k < 64; k++)
        s += table[(item * 31 + k * 17) & 4095];
    return s;
}

static void *worker(void *arg) {
    int id = (int)(long)arg;
    for (;;) {
        pthread_mutex_lock(&lock);
        while (count == 0 && !done)
            pthread_cond_wait(&not_empty, &lock);
        if (count == 0 && done) {
            pthread_mutex_unlock(&lock);
            return NULL;
        }
        int item = queue[head];
        head = (head + 1) % QUEUE;
        count--;
        pthread_cond_signal(&not_full);
        pthread_mutex_unlock(&lock);
        totals[id] += work(item);
    }
}

int main(void) {
    for (int i = 0; i < 4096; i++)
        table[i] = i % 97;
    pthread_t t[WORKERS];
    for (long i = 0; i < WORKERS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < ITEMS; i++) {
        pthread_mutex_lock(&lock);
        while (count == QUEUE)
            pthread_cond_wait(&not_full, &lock);
        queue[tail] = i;
        tail = (tail + 1) % QUEUE;
        count++;
        pthread_cond_signal(&not_empty);
        pthread_mutex_unlock(&lock);
    }
    pthread_mutex_lock(&lock);
    done = 1;
    pthread_cond_broadcast(&not_empty);
    pthread_mutex_unlock(&lock);
    long sum = 0;
    for (int i = 0; i < WORKERS; i++) {
        pthread_join(t[i], NULL);
        sum += totals[i];
    }
    printf("sum %ld\n", sum);
    return 0;
}
