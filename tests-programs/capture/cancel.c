/* Asynchronous pthread_cancel during a capture (issue 33): a worker
 * spinning with PTHREAD_CANCEL_ASYNCHRONOUS is cancelled by main, which
 * joins it; ROUNDS times, a new worker each round. Under the trap engine
 * the worker is almost always inside the engine's SIGTRAP handler when
 * SIGCANCEL arrives: glibc's sigfillset leaves SIGCANCEL out of a
 * handler's mask, so the thread ended inside the handler and the capture's
 * stop waited for ever (2 or 3 runs in 12 of `record --mode trap --all
 * --threads all -- cancel 10`). Prints "N of N cancelled".
 * `cancel read` instead cancels, with the default deferred type, a worker
 * blocked in read(2) on a pipe nobody writes to: glibc acts on the
 * cancellation only where its handler finds the thread's address in its
 * system call bridge.
 * `cancel outlive` cancels such a worker once, after a window (`window`,
 * for `--function window --threads all`) that wakes it with a byte: its
 * next read starts in translated code and goes on after the capture
 * ended, where the cancellation finds it.
 * Usage: cancel async|read|outlive|ROUNDS */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile unsigned long spins;

static int fds[2];

/* Runs as the cancellation unwinds the reader (skipped if the unwinder
 * stops short of its frame). */
static void cleanup(void *arg) {
    (void)arg;
    printf("cleanup ran\n");
}

static void *reader(void *arg) {
    (void)arg;
    char c;
    pthread_cleanup_push(cleanup, NULL);
    for (;;) {
        if (read(fds[0], &c, 1) < 0) {
            break;
        }
    }
    pthread_cleanup_pop(0);
    return NULL;
}

static void *worker(void *arg) {
    (void)arg;
    int old;
    pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &old);
    for (;;) {
        spins++;
    }
    return NULL;
}

/* Wakes the reader, whose next read starts in translated code. */
__attribute__((noinline)) unsigned long window(unsigned long n) {
    unsigned long s = 0;
    if (write(fds[1], "x", 1) != 1)
        return 0;
    for (unsigned long i = 0; i < n; i++)
        s += i * spins;
    return s;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "outlive") == 0) {
        pthread_t t;
        if (pipe(fds) != 0 || pthread_create(&t, NULL, reader, NULL) != 0)
            return 1;
        usleep(20 * 1000);
        spins = window(30000);
        usleep(20 * 1000);
        pthread_cancel(t);
        void *res;
        pthread_join(t, &res);
        printf("%d of 1 cancelled\n", res == PTHREAD_CANCELED);
        return 0;
    }
    int blocked = argc > 1 && strcmp(argv[1], "read") == 0;
    int rounds = argc > 1 && strcmp(argv[1], "async") != 0 && !blocked ? atoi(argv[1]) : 10;
    int cancelled = 0;
    if (blocked && pipe(fds) != 0) {
        return 1;
    }
    for (int r = 0; r < rounds; ++r) {
        pthread_t t;
        if (pthread_create(&t, NULL, blocked ? reader : worker, NULL) != 0) {
            return 1;
        }
        usleep(20 * 1000);
        pthread_cancel(t);
        void *res;
        pthread_join(t, &res);
        cancelled += res == PTHREAD_CANCELED;
    }
    printf("%d of %d cancelled\n", cancelled, rounds);
    return 0;
}
