/* rseqspin.c - the main thread and a worker, both pinned to one CPU, add 1
 * to that CPU's counter in rseq critical sections that spin a while
 * between the load and the committing store, until stdin is closed (a
 * third thread reads it). Natively the counter equals the sum of the
 * increments each thread made: a section preempted before its commit is
 * aborted by the kernel and retried. `attach` stops the main thread
 * (almost always inside a section) and runs remote calls on it while the
 * worker runs on the same CPU, then captures calls of `note`; a section resumed without the kernel's
 * abort would commit a stale value (crates/cli/tests/attach.rs).
 *
 * Prints "ready", then "total T of N" (T the counter, N the increments
 * made), or "rseq not registered" where glibc registered no area (it then
 * only calls `note`). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/rseq.h>
#include <unistd.h>

#define CPUS 1024
static long counts[CPUS][8];
static volatile int stop;
static cpu_set_t one;

static inline struct rseq *self_rseq(void) {
    return (struct rseq *)((char *)__builtin_thread_pointer() + __rseq_offset);
}

__attribute__((noinline)) void percpu_inc(void) {
    struct rseq *rs = self_rseq();
    for (;;) {
        uint32_t cpu = __atomic_load_n(&rs->cpu_id, __ATOMIC_RELAXED);
        long *v = &counts[cpu % CPUS][0];
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
            "movl $20000, %%ecx\n\t"
            "5:\n\t"
            "decl %%ecx\n\t"
            "jnz 5b\n\t"
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
            : "rax", "rcx", "memory", "cc"
            : abort);
        return;
    abort:;
    }
}

/* Called every 1,000 increments: the window `attach` captures (a
 * section of 20,000 steps under the trap engine outlasts a time slice, and
 * one preempted before its commit is aborted and retried, for ever). */
__attribute__((noinline)) long note(long made) {
    __asm__ volatile("" ::: "memory");
    return made + 1;
}

static long spin(void) {
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    long made = 0;
    while (!stop) {
        if (__rseq_size != 0) percpu_inc();
        made++;
        if (made % 1000 == 0) made = note(made) - 1;
    }
    return made;
}

static void *worker(void *out) {
    *(long *)out = spin();
    return NULL;
}

static void *reader(void *a) {
    (void)a;
    char b[8];
    while (read(0, b, sizeof b) > 0) {
    }
    stop = 1;
    return NULL;
}

int main(void) {
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    long by_worker = 0;
    pthread_t w, r;
    pthread_create(&w, NULL, worker, &by_worker);
    pthread_create(&r, NULL, reader, NULL);
    printf("ready\n");
    fflush(stdout);
    long by_main = spin();
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    long sum = 0;
    for (int c = 0; c < CPUS; c++) sum += counts[c][0];
    if (__rseq_size == 0)
        printf("rseq not registered\n");
    else
        printf("total %ld of %ld\n", sum, by_main + by_worker);
    return 0;
}
