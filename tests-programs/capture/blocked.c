/* blocked.c - hostile-program test: a `coldcache trigger` arrives while the
 * program's other threads are blocked, one in read() on a pipe, one in a
 * futex wait (pthread_cond_wait).
 *
 * Usage: blocked  (for `record --signal`)
 *   Prints "ready" once both threads are blocked, spins for 1.5 s (the
 *   test starts, and may stop, a capture meanwhile), then wakes the reader
 *   (one byte down the pipe) and the waiter (the condition variable), joins
 *   both and prints what each got.
 */
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static int fds[2];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int go, waiting;

static unsigned long work(int n)
{
    unsigned long s = 0;
    for (int i = 0; i < n; i++)
        s = s * 31 + (unsigned long)i;
    return s;
}

static void *reader(void *arg)
{
    (void)arg;
    char c = 0;
    ssize_t n;
    do
        n = read(fds[0], &c, 1);
    while (n < 0);
    printf("reader got %c after %zd byte\n", c, n);
    return NULL;
}

static void *waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    waiting = 1;
    while (!go)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    printf("waiter woke %lu\n", work(40));
    return NULL;
}

int main(void)
{
    pthread_t r, w;
    if (pipe(fds) != 0)
        return 2;
    pthread_create(&r, NULL, reader, NULL);
    pthread_create(&w, NULL, waiter, NULL);
    for (;;) {
        pthread_mutex_lock(&mu);
        int ok = waiting;
        pthread_mutex_unlock(&mu);
        if (ok)
            break;
        usleep(1000);
    }
    usleep(50000); /* the reader is in read(), the waiter in futex wait */
    printf("ready %lu\n", work(10));
    fflush(stdout);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        sink = work(100);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 1500000000L);
    if (write(fds[1], "x", 1) != 1)
        return 3;
    pthread_join(r, NULL);
    pthread_mutex_lock(&mu);
    go = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(w, NULL);
    printf("spun %lu\n", sink);
    return 0;
}
