/* rseq.c - hostile-program test: per-CPU counters incremented by four
 * threads in an rseq critical section (glibc's registered area; load,
 * add, store: the store commits; the abort handler retries), as per-CPU
 * allocators (tcmalloc) do. Natively the total is exact: a section
 * preempted or migrated before its commit is aborted by the kernel.
 *
 * Usage: rseq [ITERATIONS per thread, default 200000]
 * Prints "total T of N", or "rseq not registered" where glibc did not
 * register an area (older glibc, or its tunable off). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/rseq.h>

#define THREADS 4
#define CPUS 256
static long counts[CPUS][8];
static int iters = 200000;

static inline struct rseq *self_rseq(void) {
    return (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
}

__attribute__((noinline)) static void percpu_inc(void) {
    struct rseq *rs = self_rseq();
    for (;;) {
        uint32_t cpu = __atomic_load_n(&rs->cpu_id, __ATOMIC_RELAXED);
        long *v = &counts[cpu][0];
        __asm__ goto(
            ".pushsection __rseq_cs, \"aw\"\n\t"
            ".balign 32\n\t"
            "3:\n\t"
            ".long 0x0, 0x0\n\t"
            ".quad 1f, (2f - 1f), 4f\n\t"
            ".popsection\n\t"
            "leaq 3b(%%rip), %%rax\n\t"
            "movq %%rax, %[rseq_cs]\n\t"
            "1:\n\t"
            "cmpl %[cpu], %[current]\n\t"
            "jnz 4f\n\t"
            "movq %[v], %%rax\n\t"
            "addq $1, %%rax\n\t"
            "movq %%rax, %[v]\n\t"
            "2:\n\t"
            ".pushsection __rseq_failure, \"ax\"\n\t"
            ".byte 0x0f, 0xb9, 0x3d\n\t"
            ".long 0x53053053\n\t"
            "4:\n\t"
            "jmp %l[abort]\n\t"
            ".popsection\n\t"
            :
            : [rseq_cs] "m"(rs->rseq_cs), [cpu] "r"(cpu), [current] "m"(rs->cpu_id), [v] "m"(*v)
            : "rax", "memory", "cc"
            : abort);
        return;
    abort:;
    }
}

static void *worker(void *a) {
    (void)a;
    for (int i = 0; i < iters; i++) percpu_inc();
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) iters = atoi(argv[1]);
    if (__rseq_size == 0) { printf("rseq not registered\n"); return 0; }
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    long sum = 0;
    for (int c = 0; c < CPUS; c++) sum += counts[c][0];
    printf("total %ld of %ld\n", sum, (long)THREADS * iters);
    return 0;
}
