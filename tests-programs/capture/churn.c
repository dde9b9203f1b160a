/* churn.c - hostile-program test: a thread pool that churns during a capture.
 *
 * Usage: churn plain|capture N [OUTPUT]
 * Starts a capture of every thread (C API, COLDCACHE_THREADS_ALL), then
 * creates and joins N short-lived threads one after another (at most two
 * alive at once), stops, and prints the sum the threads computed. A
 * capture that gave every thread ever created a slot of its own was cut
 * short after 64 creations.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "coldcache.h"

static void *job(void *arg)
{
    uintptr_t n = (uintptr_t)arg, s = 0;
    for (uintptr_t i = 0; i < 50; i++)
        s += i * n;
    return (void *)s;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: churn plain|capture N [OUTPUT]\n");
        return 2;
    }
    int capture = strcmp(argv[1], "capture") == 0;
    int n = atoi(argv[2]);
    struct coldcache_options o;
    coldcache_options_init(&o);
    o.threads = COLDCACHE_THREADS_ALL;
    o.cache = "jaguar";
    o.output = argc > 3 ? argv[3] : "churn.ccdump";
    if (capture && coldcache_start(&o) != 0) {
        fprintf(stderr, "start: %s\n", coldcache_last_error());
        return 1;
    }
    uintptr_t total = 0;
    for (int i = 0; i < n; i++) {
        pthread_t t;
        void *r;
        pthread_create(&t, NULL, job, (void *)(uintptr_t)(i + 1));
        pthread_join(t, &r);
        total += (uintptr_t)r;
    }
    if (capture && coldcache_stop() != 0) {
        fprintf(stderr, "stop: %s\n", coldcache_last_error());
        return 1;
    }
    printf("total %lu\n", (unsigned long)total);
    return 0;
}
