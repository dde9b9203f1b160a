/* api.c: a C program that captures one region with the coldcache API.
 *
 * Build: gcc -O1 -g -I../../include api.c -L../../target/release -lcoldcache -o api
 * Run:   LD_LIBRARY_PATH=../../target/release ./api [dump]
 *        (or: coldcache record -- ./api, which sets the cache and output)
 */
#include <stdio.h>
#include <stdlib.h>
#include "coldcache.h"

#define N 4096

struct particle { float x, y, z, vx, vy, vz; int alive; char pad[36]; };

__attribute__((noinline)) static float integrate(struct particle *p, int n) {
    float sum = 0;
    for (int i = 0; i < n; i++) {
        if (p[i].alive) {
            p[i].x += p[i].vx;
            sum += p[i].x;
        }
    }
    return sum;
}

int main(int argc, char **argv) {
    struct particle *p = calloc(N, sizeof *p);
    for (int i = 0; i < N; i++) { p[i].vx = 1.0f; p[i].alive = i % 3 != 0; }
    struct coldcache_options o;
    coldcache_options_init(&o);
    if (argc > 1) o.output = argv[1];
    if (coldcache_start(&o) != 0) {
        fprintf(stderr, "capture failed: %s\n", coldcache_last_error());
        return 1;
    }
    float s = integrate(p, N);
    if (coldcache_stop() != 0) {
        fprintf(stderr, "stop failed: %s\n", coldcache_last_error());
        return 1;
    }
    printf("sum %.0f\n", s);
    free(p);
    return 0;
}
