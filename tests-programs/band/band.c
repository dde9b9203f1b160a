/* The layout-noise band's test program (crates/cli/tests/band.rs, issue 37).
 *
 * Run on a small Cachegrind model (I1 1 KiB 2-way: 8 sets of 64 bytes, a
 * 512-byte span; D1 2 KiB 2-way: 16 sets, a 1 KiB span), bench() misses
 * in two ways per iteration:
 * - whatever the layout: thrash() jumps through 24 lines of code 512 bytes
 *   apart (one I1 set), and the walk of `big` reads 40 lines 1 KiB apart
 *   (one D1 set): 24 and 40 misses;
 * - depending on the layout: the walkers' code (about 12 lines) and the
 *   arrays a (a global), b and c (heap), 6 lines each, share the
 *   other sets; a line in the thrashed set, or three in one set, misses
 *   every iteration.
 * So misses move by some percent with layout, as in a real benchmark.
 *
 * Variants (one source, -D at build time, built with -fno-toplevel-reorder
 * so the source order is the layout order):
 *   A   (none)       the baseline;
 *   B   -DVARIANT_B  an unrelated function before walk_b() and bench()
 *                    (they move by 3 lines, walk_a does not) and an
 *                    unrelated global before the array a (it moves by 5
 *                    lines): layout noise, the same work;
 *   C   -DVARIANT_C  bench() runs its loop twice: a real regression.
 */
#include <stdio.h>
#include <stdlib.h>

#ifndef UNRELATED_LONGS
#define UNRELATED_LONGS 40 /* 5 lines */
#endif

#define LONGS 48 /* 6 lines of 64 bytes */
#define BIG_LINES 40
#define ITER 300

/* 64 four-byte nops: 256 bytes, 4 lines of code fetched per call. */
#define CODE_BULK() __asm__ volatile(".fill 64, 4, 0x00401f0f")

#ifdef VARIANT_B
long unrelated_global[UNRELATED_LONGS] = {1};
#endif
long a[LONGS] = {1};

__attribute__((noinline)) static long walk_a(const long *p) {
    long s = 0;
    CODE_BULK();
    for (int i = 0; i < LONGS; i++) {
        s = s * 3 + p[i];
        __asm__ volatile("" : "+r"(s));
    }
    return s;
}

/* 24 lines of code 512 bytes apart: one I1 set, whatever the layout. */
__attribute__((noinline)) static void thrash(void) {
    __asm__ volatile(".rept 24\n\t"
                     "jmp 1f\n\t"
                     ".p2align 9\n"
                     "1:\n\t"
                     ".endr" ::: "memory");
}

#ifdef VARIANT_B
__attribute__((noinline, used)) long unrelated(long x) {
    __asm__ volatile(".fill 44, 4, 0x00401f0f");
    return x * 7 + 1;
}
#endif

__attribute__((noinline)) static long walk_b(const long *p) {
    long s = 1;
    CODE_BULK();
    for (int i = 0; i < LONGS; i++) {
        s = s * 5 + p[i];
        __asm__ volatile("" : "+r"(s));
    }
    return s;
}

/* BIG_LINES lines 1 KiB apart: one D1 set, whatever the layout. */
__attribute__((noinline)) static long walk_big(const long *p) {
    long s = 0;
    for (int i = 0; i < BIG_LINES; i++) {
        s += p[i * 128];
        __asm__ volatile("" : "+r"(s));
    }
    return s;
}

__attribute__((noinline)) long bench(const long *b, const long *c, const long *big) {
    long s = 0;
#ifdef VARIANT_C
    for (int r = 0; r < 2; r++)
#endif
        for (int it = 0; it < ITER; it++) {
            thrash();
            s += walk_a(a);
            s += walk_b(b);
            s ^= walk_b(c);
            s += walk_big(big);
        }
    return s;
}

int main(int argc, char **argv) {
    long *b = malloc(LONGS * sizeof(long));
    long *big = calloc(BIG_LINES * 128, sizeof(long));
    /* Not on the stack: where the stack lies depends on the environment's
     * size, which would make the measured misses depend on it. */
    long *c = malloc(LONGS * sizeof(long));
    for (int i = 0; i < LONGS; i++) {
        a[i] = i;
        b[i] = 2 * i;
        c[i] = 3 * i;
    }
#ifdef VARIANT_B
    if (argc > 5)
        a[0] = unrelated(argc);
#endif
    (void)argv;
    printf("%ld\n", bench(b, c, big));
    free(c);
    free(big);
    free(b);
    return 0;
}
