/* strings.c - memcpy/memmove/memset/strlen/strcmp/qsort over C strings.
 *
 * Oracle test program for coldcache.  Calls into glibc's vectorized string
 * routines (which glibc picks at run time from CPUID, so the same binary
 * exercises SSE2/AVX2 loads and stores of 16 and 32 bytes), at deliberately
 * odd offsets so that many accesses are unaligned and straddle cache lines.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

#ifndef NSTR /* a test may build a smaller run with -DNSTR=... */
#define NSTR 600
#endif
#define MAXLEN 120

static uint32_t rng_state = 12345u;

static uint32_t rng(void)
{
    /* 32-bit LCG (Numerical Recipes constants) */
    rng_state = rng_state * 1664525u + 1013904223u;
    return rng_state >> 8;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void)
{
    static char pool[NSTR * (MAXLEN + 8)];
    char *strs[NSTR];
    char *p = pool;
    for (int i = 0; i < NSTR; i++) {
        p += rng() % 7; /* odd alignment */
        int len = 1 + (int)(rng() % MAXLEN);
        for (int j = 0; j < len; j++)
            p[j] = (char)('a' + rng() % 4); /* small alphabet: long common prefixes */
        p[len] = '\0';
        strs[i] = p;
        p += len + 1;
    }

    size_t total = 0;
    for (int i = 0; i < NSTR; i++)
        total += strlen(strs[i]);

    qsort(strs, NSTR, sizeof strs[0], cmp);

    /* copy everything into a second, differently aligned buffer */
    char *buf = malloc(total + NSTR + 64);
    if (!buf)
        return 1;
    char *q = buf + 3;
    for (int i = 0; i < NSTR; i++) {
        size_t n = strlen(strs[i]);
        memcpy(q, strs[i], n);
        q[n] = '\n';
        q += n + 1;
    }
    size_t used = (size_t)(q - (buf + 3));

    /* overlapping moves and fills */
    for (int r = 0; r < 40; r++) {
        size_t off = 1 + rng() % 61;
        size_t n = used / 2 - off;
        memmove(buf + 3 + off, buf + 3, n);
        memset(buf + 3 + n / 3, 'z', 1 + rng() % 200);
    }

    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < used; i++) {
        h ^= (unsigned char)buf[3 + i];
        h *= 16777619u;
    }
    printf("strings n=%d total=%zu first=%.8s hash=%08x\n", NSTR, total, strs[0], h);
    free(buf);
    return 0;
}
