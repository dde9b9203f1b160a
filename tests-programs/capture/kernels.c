/* kernels.c - capture test program: small kernels whose accesses are known,
 * run natively under coldcache and under Valgrind (lackey, callgrind).
 *
 * Usage: kernels MODE KERNEL
 *   MODE   plain     just run KERNEL (for `coldcache record --function`,
 *                    lackey and callgrind --toggle-collect)
 *          coldcache run KERNEL between coldcache_start/coldcache_stop
 *                    (then CACHE, DUMP and TRACE, a cctrace file, optional)
 *          callgrind run KERNEL between CALLGRIND_START/STOP_INSTRUMENTATION
 *   KERNEL one of the k_* functions below, without the prefix.
 *
 * Every kernel is 64-byte aligned so no two share an instruction cache
 * line, touches only globals and its own stack, and is deterministic.
 * main warms up libc (printf, malloc) before any kernel runs, so lazy
 * binding and allocator set-up do not fall inside a kernel.
 *
 * Built by the tests with: gcc -O1 -g -fno-pie -no-pie -I include ...
 *                          -L target/release -lcoldcache -Wl,-rpath,...
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <setjmp.h>
#include <valgrind/callgrind.h>
#include "coldcache.h"

#define K __attribute__((noinline, aligned(64)))

static uint64_t big[1 << 15] __attribute__((aligned(64)));
struct obj { uint64_t id; char name[40]; uint16_t hot; uint16_t pad[3]; uint64_t cold[4]; };
static struct obj objs[512] __attribute__((aligned(64)));
static unsigned char src[4096] __attribute__((aligned(64)));
static unsigned char dst[4096] __attribute__((aligned(64)));
static uint64_t bitmap[64];
static unsigned char table[256];
static uint64_t counter;
static unsigned __int128 pair;
static int sortme[300];

K uint64_t k_strided(void) {
    uint64_t s = 0;
    for (int i = 0; i < 2000; i++) s += big[(i * 8) % (1 << 15)];
    return s;
}

K uint64_t k_struct_walk(void) {
    uint64_t n = 0;
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 512; i++)
            if (objs[i].hot) n += objs[i].id;
    return n;
}

K uint64_t k_strings(void) {
    /* rep movsb forwards, rep stosq, backwards movsb (DF=1), repe cmpsb, lodsb */
    void *d = dst, *s = src; size_t n = 300;
    __asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
    d = dst + 512; n = 40;
    __asm__ volatile("rep stosq" : "+D"(d), "+c"(n) : "a"(0x1234) : "memory");
    d = dst + 1299; s = src + 1299; n = 100;
    __asm__ volatile("std\n rep movsb\n cld" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
    const void *a = src, *b = dst; n = 64;
    __asm__ volatile("repe cmpsb" : "+D"(b), "+S"(a), "+c"(n) : : "memory", "cc");
    uint64_t acc = n;
    const void *p = src + 7;
    for (int i = 0; i < 20; i++) {
        unsigned char c;
        __asm__ volatile("lodsb" : "=a"(c), "+S"(p) : : "memory");
        acc += c;
    }
    n = 0; d = dst;
    __asm__ volatile("rep stosb" : "+D"(d), "+c"(n) : "a"(0) : "memory"); /* RCX = 0: no access */
    return acc;
}

K uint64_t k_depth(int d) {
    if (d == 0) return 1;
    return k_depth(d - 1) * 3 + (uint64_t)d;
}

K uint64_t k_stack(void) {
    uint64_t r = k_depth(40);
    __asm__ volatile("enter $32, $0\n movq $5, -8(%%rbp)\n leave" : : : "memory");
    __asm__ volatile("pushq %0\n popq %0" : "+r"(r));
    __asm__ volatile("pushq big+64(%%rip)\n popq big+128(%%rip)" : : : "memory");
    return r;
}

K uint64_t k_x86isms(void) {
    uint64_t acc = 0;
    __atomic_fetch_add(&counter, 5, __ATOMIC_SEQ_CST);
    uint64_t expected = counter;
    __atomic_compare_exchange_n(&counter, &expected, expected + 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    uint64_t x = 9;
    __asm__ volatile("xchg %0, counter(%%rip)" : "+r"(x) : : "memory");
    uint64_t lo = (uint64_t)pair, hi = (uint64_t)(pair >> 64);
    __asm__ volatile("lock cmpxchg16b %0" : "+m"(pair), "+a"(lo), "+d"(hi) : "b"(lo + 1), "c"(hi) : "cc");
    __asm__ volatile("movdqa big(%%rip), %%xmm1\n movups %%xmm1, big+200(%%rip)" : : : "xmm1", "memory");
    __asm__ volatile("movnti %1, %0" : "=m"(big[100]) : "r"(acc));
    return acc + x;
}

/* Bit tests with register offsets: lackey reports them differently (a
 * 1-byte modify), so they are compared with callgrind's counts only. */
K uint64_t k_bits(void) {
    uint64_t acc = 0;
    for (long i = -70; i < 300; i += 37) {
        __asm__ volatile("btsq %1, bitmap+256(%%rip)" : "+m"(bitmap[32]) : "r"(i) : "cc", "memory");
        acc += (uint64_t)i;
    }
    return acc;
}

/* xlat is not supported by Valgrind in 64-bit mode: checked by hand. */
K uint64_t k_xlat(void) {
    uint64_t acc = 0;
    for (int i = 0; i < 5; i++) {
        unsigned char c;
        __asm__ volatile("xlat" : "=a"(c) : "a"((uint64_t)(i * 50)), "b"(table) : "memory");
        acc += c;
    }
    return acc;
}

/* longjmp out of a recursion, then a call: the shadow stack must drop the
 * abandoned frames (checked by the capture tests through stack depths). */
static jmp_buf jump_env;
K void k_deep(int d) {
    if (d == 0) longjmp(jump_env, 1);
    k_deep(d - 1);
    __asm__ volatile("" ::: "memory"); /* not a tail call */
}
K uint64_t k_leaf(void) { return 42; }
K uint64_t k_longjmp(void) {
    if (setjmp(jump_env) == 0) k_deep(6);
    return k_leaf();
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

K uint64_t k_libc(void) {
    /* libc calls and a system call (write), for instruction counts */
    qsort(sortme, 300, sizeof sortme[0], cmp_int);
    char buf[64];
    int n = snprintf(buf, sizeof buf, "k_libc %d %d\n", sortme[0], sortme[299]);
    ssize_t w = write(1, buf, (size_t)n);
    return (uint64_t)(w + (ssize_t)strlen(buf));
}

/* Calls fn with the stack pointer aligned to 64 bytes, so the kernel's
 * stack lines are laid out the same natively and under Valgrind (which
 * places the stack elsewhere): cold-cache miss counts then agree. */
uint64_t call_aligned(uint64_t (*fn)(void));
__asm__(".text\n"
        ".p2align 6\n"
        ".globl call_aligned\n"
        "call_aligned:\n"
        "  push %rbp\n"
        "  mov %rsp, %rbp\n"
        "  and $-64, %rsp\n"
        "  call *%rdi\n"
        "  mov %rbp, %rsp\n"
        "  pop %rbp\n"
        "  ret\n");

struct entry { const char *name; uint64_t (*fn)(void); };
static const struct entry kernels[] = {
    {"strided", k_strided}, {"struct_walk", k_struct_walk}, {"strings", k_strings},
    {"stack", k_stack}, {"x86isms", k_x86isms}, {"bits", k_bits}, {"xlat", k_xlat}, {"libc", k_libc}, {"longjmp", k_longjmp},
};

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: kernels plain|coldcache|callgrind KERNEL\n"); return 2; }
    for (int i = 0; i < (1 << 15); i++) big[i] = (uint64_t)i * 2654435761u;
    for (int i = 0; i < 512; i++) { objs[i].id = (uint64_t)i; objs[i].hot = (uint16_t)(i % 3 == 0); }
    for (int i = 0; i < 4096; i++) src[i] = (unsigned char)(i * 7);
    for (int i = 0; i < 256; i++) table[i] = (unsigned char)(255 - i);
    for (int i = 0; i < 300; i++) sortme[i] = (i * 7919) % 1000;
    char *warm = malloc(100);
    snprintf(warm, 100, "warm %d", argc);
    printf("%s\n", warm);
    fflush(stdout);
    free(warm);
    const struct entry *e = NULL;
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (strcmp(kernels[i].name, argv[2]) == 0) e = &kernels[i];
    if (!e) { fprintf(stderr, "unknown kernel %s\n", argv[2]); return 2; }
    uint64_t r;
    if (strcmp(argv[1], "coldcache") == 0) {
        struct coldcache_options o;
        coldcache_options_init(&o);
        o.cache = argc > 3 ? argv[3] : "cachegrind";
        o.output = argc > 4 ? argv[4] : "kernels.ccdump";
        o.trace = argc > 5 ? argv[5] : NULL;
        if (coldcache_start(&o) != 0) { fprintf(stderr, "%s\n", coldcache_last_error()); return 1; }
        r = call_aligned(e->fn);
        coldcache_stop();
    } else if (strcmp(argv[1], "callgrind") == 0) {
        CALLGRIND_START_INSTRUMENTATION;
        r = call_aligned(e->fn);
        CALLGRIND_STOP_INSTRUMENTATION;
    } else {
        r = call_aligned(e->fn);
    }
    printf("%s %llu\n", e->name, (unsigned long long)r);
    return 0;
}
