/* Translations kept across captures, and object tracking switched on
 * between them (issue 32). Capture 1 (object tracking off, every thread)
 * starts a worker that blocks in read(2) from translated code and is still
 * there when capture 1 stops, so the translator keeps its blocks
 * (malloc's among them, translated without the allocator's registers in
 * their records). Capture 2 (tracking on, this thread) allocates 50
 * blocks of 100 + i bytes (6,225 bytes in all) from one line, writes 4
 * ints into each, and frees them: its dump must show that site with 50
 * blocks and 6,225 bytes. Usage: kept DUMP1 DUMP2. */
#include <coldcache.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int fds[2];
static void *volatile keep[50];

static void *worker(void *arg) {
    (void)arg;
    char c;
    /* Blocks until main writes, after capture 2. */
    return (void *)(long)read(fds[0], &c, 1);
}

__attribute__((noinline)) static long churn(int n, size_t base) {
    long sum = 0;
    for (int i = 0; i < n; ++i) {
        volatile int *p = malloc(base + (size_t)i); /* the site */
        for (int k = 0; k < 4; ++k) {
            p[k] = k;
        }
        keep[i] = (void *)p;
        sum += (long)(base + (size_t)i);
    }
    for (int i = 0; i < n; ++i) {
        free(keep[i]);
    }
    return sum;
}

int main(int argc, char **argv) {
    if (argc != 3 || pipe(fds) != 0) {
        fprintf(stderr, "usage: kept DUMP1 DUMP2\n");
        return 2;
    }
    struct coldcache_options o;
    coldcache_options_init(&o);
    o.threads = COLDCACHE_THREADS_ALL;
    o.output = argv[1];
    o.mode = "fast";
    setenv("COLDCACHE_OBJECTS", "0", 1);
    if (coldcache_start(&o) != 0) {
        fprintf(stderr, "start 1: %s\n", coldcache_last_error());
        return 1;
    }
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    long first = churn(50, 1000);
    usleep(100 * 1000); /* the worker reaches its read */
    if (coldcache_stop() != 0) {
        fprintf(stderr, "stop 1: %s\n", coldcache_last_error());
        return 1;
    }
    setenv("COLDCACHE_OBJECTS", "1", 1);
    o.threads = COLDCACHE_THREADS_CALLER;
    o.output = argv[2];
    if (coldcache_start(&o) != 0) {
        fprintf(stderr, "start 2: %s\n", coldcache_last_error());
        return 1;
    }
    long second = churn(50, 100);
    if (coldcache_stop() != 0) {
        fprintf(stderr, "stop 2: %s\n", coldcache_last_error());
        return 1;
    }
    if (write(fds[1], "x", 1) != 1) {
        return 1;
    }
    pthread_join(t, NULL);
    printf("%ld %ld\n", first, second);
    return 0;
}
