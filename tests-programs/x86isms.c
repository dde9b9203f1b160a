/* x86isms.c - x86-64 instructions whose memory accesses are unusual.
 *
 * Oracle test program for coldcache.  Each construct below is recorded by
 * Valgrind in a way a cache simulator has to handle exactly like Cachegrind:
 *   - fxsave/fxrstor: the x87 part is one 160-byte access (a VEX "dirty
 *     helper"); Cachegrind clamps such accesses to its minimum line size,
 *     lackey prints the full size;
 *   - fnstenv: a 28-byte store;
 *   - long double loads/stores: 10-byte accesses (fldt/fstpt);
 *   - lock xadd / lock cmpxchg16b: compare-and-swap, traced as one modify;
 *   - rep stosb / rep movsb: one instruction record per iteration;
 *   - unaligned 2/4/8-byte accesses that straddle lines.
 * Deterministic; prints a checksum.
 */
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#define ITERS 1500

static unsigned char area[8192] __attribute__((aligned(64)));
static unsigned __int128 pairs[64] __attribute__((aligned(16)));

int main(void)
{
    long double x = 1.0L;
    uint64_t acc = 0;
    for (int i = 0; i < ITERS; i++) {
        /* fxsave/fxrstor need a 16-byte aligned 512-byte area */
        unsigned char *fx = area + ((i * 48) % 3000 + 15) / 16 * 16;
        __asm__ volatile("fxsave %0" : "=m"(*(unsigned char(*)[512])fx));
        acc += fx[160 + (i % 32)];
        __asm__ volatile("fxrstor %0" : : "m"(*(unsigned char(*)[512])fx));

        /* 28-byte x87 environment store at an odd address */
        __asm__ volatile("fnstenv %0" : "=m"(*(unsigned char(*)[28])(area + 3600 + (i % 37))));
        __asm__ volatile("fldcw %0" : : "m"(*(unsigned short *)(area + 3600 + (i % 37))));

        /* 10-byte long double traffic */
        volatile long double y = x * 1.0001L + (long double)i;
        x = y;
        acc += (uint64_t)(y / 1e6L);

        /* atomics: lock xadd on an unaligned-ish slot, 16-byte CAS */
        uint64_t *q = (uint64_t *)(area + 4096 + (i * 8) % 2048);
        __atomic_fetch_add(q, (uint64_t)i, __ATOMIC_SEQ_CST);
        unsigned __int128 *pp = &pairs[i % 64];
        uint64_t lo = (uint64_t)*pp, hi = (uint64_t)(*pp >> 64);
        uint64_t nlo = lo + 3, nhi = hi + (nlo < lo);
        __asm__ volatile("lock cmpxchg16b %0"
                         : "+m"(*pp), "+a"(lo), "+d"(hi)
                         : "b"(nlo), "c"(nhi)
                         : "cc");

        /* string instructions: one trace record per iteration */
        void *dst = area + 6200 + (i % 61);
        size_t n = 1 + (size_t)(i % 97);
        __asm__ volatile("rep stosb" : "+D"(dst), "+c"(n) : "a"(i & 0xff) : "memory");
        const void *src = area + 6200 + (i % 53);
        dst = area + 7100 + (i % 59);
        n = 1 + (size_t)(i % 89);
        __asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");

        /* unaligned scalar accesses across a 64-byte boundary */
        uint64_t u;
        memcpy(&u, area + 64 * (1 + i % 20) - 1 - (i % 7), sizeof u);
        acc ^= u;
        uint32_t w = (uint32_t)acc;
        memcpy(area + 64 * (30 + i % 20) - 2, &w, sizeof w);
    }
    uint64_t h = acc;
    for (size_t k = 0; k < sizeof area; k += 8) {
        uint64_t v;
        memcpy(&v, area + k, 8);
        h = h * 31 + v;
    }
    for (int k = 0; k < 64; k++)
        h ^= (uint64_t)pairs[k];
    printf("x86isms iters=%d acc=%llu hash=%llu\n", ITERS, (unsigned long long)acc,
           (unsigned long long)h);
    return 0;
}
