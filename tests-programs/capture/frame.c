/* frame.c - the capture-speed benchmark's program: "frames" of dense work
 * (a matrix multiply), as a game or engine loop runs them.
 *
 * Usage: frame N FRAMES [THREADS [api]]
 *   N        matrix size (one frame of N=200 is about 56 million
 *            instructions at -O1, N=250 about 110 million)
 *   FRAMES   frames to run
 *   THREADS  worker threads sharing each frame's rows (1: the caller alone)
 *   api      capture the second frame through the C API, every thread
 *            (cache "jaguar", mode from COLDCACHE_MODE)
 * Prints a checksum on stdout and each frame's wall time on stderr.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "coldcache.h"

static int n;
static double *a, *b, *c;

struct part { int from, to; };

static void rows(int from, int to) {
    for (int i = from; i < to; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
}

static void *worker(void *arg) {
    struct part *p = arg;
    rows(p->from, p->to);
    return NULL;
}

__attribute__((noinline)) void frame(int threads) {
    if (threads <= 1) { rows(0, n); return; }
    pthread_t t[64];
    struct part p[64];
    for (int i = 0; i < threads; i++) {
        p[i].from = n * i / threads;
        p[i].to = n * (i + 1) / threads;
        pthread_create(&t[i], NULL, worker, &p[i]);
    }
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: frame N FRAMES [THREADS [api]]\n"); return 2; }
    n = atoi(argv[1]);
    int frames = atoi(argv[2]);
    int threads = argc > 3 ? atoi(argv[3]) : 1;
    int api = argc > 4 && strcmp(argv[4], "api") == 0;
    if (n < 1 || frames < 1 || threads < 1 || threads > 64) return 2;
    a = malloc(sizeof(double) * n * n);
    b = malloc(sizeof(double) * n * n);
    c = malloc(sizeof(double) * n * n);
    for (int i = 0; i < n * n; i++) { a[i] = i % 7; b[i] = i % 5; }
    double sum = 0;
    for (int f = 0; f < frames; f++) {
        int capture = api && f == 1;
        if (capture) {
            struct coldcache_options o;
            coldcache_options_init(&o);
            o.threads = COLDCACHE_THREADS_ALL;
            o.cache = "jaguar";
            o.output = "frame.ccdump";
            if (coldcache_start(&o) != 0) { fprintf(stderr, "%s\n", coldcache_last_error()); return 1; }
        }
        double t0 = now();
        frame(threads);
        double t1 = now();
        if (capture) coldcache_stop();
        fprintf(stderr, "frame %d: %.6f s\n", f, t1 - t0);
        sum += c[(f * 31) % (n * n)];
    }
    printf("%.1f\n", sum);
    return 0;
}
