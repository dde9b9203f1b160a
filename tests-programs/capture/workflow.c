/* workflow.c - the capture workflow's test program (crates/cli/tests/workflow.rs).
 *
 * Usage: workflow MODE
 *   once      calls count_and_sort once and prints its checksum
 *   windows   prints "ready", then spins until the file `stop` exists in
 *             the working directory (at most 30 s): `record --signal`
 *             windows are opened by the test meanwhile
 *   sigint    like windows, with a SIGINT handler of its own that counts:
 *             spins until the second SIGINT (at most 30 s), then prints
 *             "ready" and the count and exits 0
 *   api PATH  (built with -DWITH_COLDCACHE_API -lcoldcache) two C API captures: the first
 *             written to PATH, the second to the default path (record's -o)
 *
 * Every mode prints the checksum of count_and_sort(…), so lost standard
 * output shows.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef WITH_COLDCACHE_API
#include "coldcache.h"
#endif

static int cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

__attribute__((noinline)) unsigned long count_and_sort(int n)
{
    int *v = malloc(sizeof(int) * (size_t)n);
    unsigned long s = 0;
    for (int i = 0; i < n; i++)
        v[i] = (i * 7919) % n;
    qsort(v, (size_t)n, sizeof(int), cmp);
    for (int i = 0; i < n; i++)
        s = s * 31 + (unsigned long)v[i];
    free(v);
    return s;
}

static volatile sig_atomic_t interrupts;

static void on_sigint(int sig)
{
    (void)sig;
    interrupts++;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: workflow once|windows|sigint|api PATH\n");
        return 2;
    }
    if (strcmp(argv[1], "once") == 0) {
        printf("%lu\n", count_and_sort(200));
        return 0;
    }
    if (strcmp(argv[1], "windows") == 0) {
        printf("ready\n");
        fflush(stdout);
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        unsigned long s = 0;
        do {
            s += count_and_sort(100);
            clock_gettime(CLOCK_MONOTONIC, &t);
        } while (access("stop", F_OK) != 0 && t.tv_sec - t0.tv_sec < 30);
        printf("%lu\n", s != 0);
        return 0;
    }
    if (strcmp(argv[1], "sigint") == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigint;
        sigaction(SIGINT, &sa, NULL);
        printf("ready\n");
        fflush(stdout);
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        unsigned long s = 0;
        do {
            s += count_and_sort(100);
            clock_gettime(CLOCK_MONOTONIC, &t);
        } while (interrupts < 2 && t.tv_sec - t0.tv_sec < 30);
        printf("%d %lu\n", (int)interrupts, s != 0);
        return 0;
    }
#ifdef WITH_COLDCACHE_API
    if (strcmp(argv[1], "api") == 0 && argc > 2) {
        struct coldcache_options o;
        coldcache_options_init(&o);
        o.output = argv[2];
        if (coldcache_start(&o) != 0)
            fprintf(stderr, "%s\n", coldcache_last_error());
        unsigned long s = count_and_sort(100);
        coldcache_stop();
        if (coldcache_start(NULL) != 0)
            fprintf(stderr, "%s\n", coldcache_last_error());
        s += count_and_sort(50);
        coldcache_stop();
        printf("%lu\n", s);
        return 0;
    }
#endif
    fprintf(stderr, "workflow: unknown mode %s\n", argv[1]);
    return 2;
}
