/* faultctx.c - hostile program for fast mode: signal handlers that read
 * and change the interrupted context (issue 33).
 *
 * Usage: faultctx CASE
 *   safefetch  probe_read(p, &ok) loads from p; a SIGSEGV handler that
 *              finds the interrupted RIP at probe_read's load (checking the
 *              other registers the probe set, and RDI against the fault
 *              address) moves RIP to the probe's recovery label and
 *              returns: the JVM's and allocators' "safe fetch". 3,000
 *              probes, one in three of a PROT_NONE page (`safefetch:N`:
 *              N probes)
 *   dladdr     a crash-style handler prints dladdr(RIP) (the object, the
 *              offset of RIP in it, the symbol) of faults in the program's
 *              own code and in the C library's strlen, then siglongjmps out
 *   retry      the SIGSEGV handler opens the page and returns with RIP
 *              unchanged (the faulting load runs again), after checking
 *              that RIP is the load's address
 *   storm      a second thread sends SIGBUS to the main thread every 20 us
 *              (pthread_kill: asynchronous, anywhere in a block) while it
 *              computes; the handler counts them (not printed) and returns
 * The handler is installed in main, which under `record --all` is inside
 * the capture (through the C library's sigaction, while fast mode runs),
 * then `work` does the case (`record --function work`: the handler was
 * installed before the capture). Prints the same lines with and without
 * capture; a handler that sees an address that is not the program's
 * prints it and exits with status 3.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#define K 0x5eed5eed5eedULL
#ifndef PROBES
#define PROBES 3000 /* -DPROBES=N to time many faults */
#endif

/* long probe_read(const long *p, int *ok): *ok = 1, returns *p; on a
 * fault the handler resumes at probe_read_recover: *ok = 0, returns 0.
 * It sets RBX, RDX and R8-R11 to K before the load, which the handler
 * checks in the context it sees. */
extern long probe_read(const long *p, int *ok);
extern char probe_read_load[], probe_read_recover[], probe_read_end[];
__asm__(".text\n"
        ".globl probe_read\n"
        ".type probe_read, @function\n"
        "probe_read:\n"
        "  push %rbx\n"
        "  movabs $0x5eed5eed5eed, %rbx\n"
        "  mov %rbx, %rdx\n"
        "  mov %rbx, %r8\n"
        "  mov %rbx, %r9\n"
        "  mov %rbx, %r10\n"
        "  mov %rbx, %r11\n"
        "  movl $1, (%rsi)\n"
        ".globl probe_read_load\n"
        "probe_read_load:\n"
        "  movq (%rdi), %rax\n"
        "  pop %rbx\n"
        "  ret\n"
        ".globl probe_read_recover\n"
        "probe_read_recover:\n"
        "  movl $0, (%rsi)\n"
        "  xorl %eax, %eax\n"
        "  pop %rbx\n"
        "  ret\n"
        ".globl probe_read_end\n"
        "probe_read_end:\n"
        ".size probe_read, probe_read_end - probe_read\n");

static char *bad;           /* a PROT_NONE page */
static long good[64];
static volatile long mismatches;
static sigjmp_buf jump;
static volatile int jumping;

static void say(const char *s) {
    ssize_t r = write(1, s, strlen(s));
    (void)r;
}

static void not_ours(const char *what, unsigned long rip) {
    char buf[160];
    snprintf(buf, sizeof buf, "%s: RIP %#lx is not the program's\n", what, rip);
    say(buf);
    _exit(3);
}

static void on_safefetch(int sig, siginfo_t *si, void *ctx) {
    (void)sig;
    ucontext_t *uc = ctx;
    greg_t *g = uc->uc_mcontext.gregs;
    unsigned long rip = (unsigned long)g[REG_RIP];
    if (rip < (unsigned long)probe_read || rip >= (unsigned long)probe_read_end)
        not_ours("safefetch", rip);
    if (rip != (unsigned long)probe_read_load)
        mismatches++;
    unsigned long want = K;
    if ((unsigned long)g[REG_RBX] != want || (unsigned long)g[REG_RDX] != want
        || (unsigned long)g[REG_R8] != want || (unsigned long)g[REG_R9] != want
        || (unsigned long)g[REG_R10] != want || (unsigned long)g[REG_R11] != want)
        mismatches++;
    if ((unsigned long)g[REG_RDI] != (unsigned long)si->si_addr)
        mismatches++;
    g[REG_RIP] = (greg_t)probe_read_recover;
}

static void on_retry(int sig, siginfo_t *si, void *ctx) {
    (void)sig;
    ucontext_t *uc = ctx;
    unsigned long rip = (unsigned long)uc->uc_mcontext.gregs[REG_RIP];
    if (rip != (unsigned long)probe_read_load)
        not_ours("retry", rip);
    char *page = (char *)((unsigned long)si->si_addr & ~4095UL);
    if (mprotect(page, 4096, PROT_READ | PROT_WRITE) != 0)
        _exit(4);
}

static void on_crash(int sig, siginfo_t *si, void *ctx) {
    (void)sig;
    (void)si;
    ucontext_t *uc = ctx;
    unsigned long rip = (unsigned long)uc->uc_mcontext.gregs[REG_RIP];
    Dl_info info;
    char buf[256];
    if (!dladdr((void *)rip, &info) || !info.dli_fname) {
        snprintf(buf, sizeof buf, "crash at %#lx: no object\n", rip);
        say(buf);
        _exit(3);
    }
    const char *base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    if (strncmp(base, "libc", 4) == 0)
        base = "libc"; /* libc.so.6 */
    snprintf(buf, sizeof buf, "crash in %s at +%#lx (%s)\n", base,
             rip - (unsigned long)info.dli_fbase,
             info.dli_sname ? info.dli_sname : "?");
    say(buf);
    if (!jumping)
        _exit(5);
    siglongjmp(jump, 1);
}

static volatile long storms;
static volatile int storming;
static pthread_t main_thread;

static void on_storm(int sig, siginfo_t *si, void *ctx) {
    (void)sig;
    (void)si;
    (void)ctx;
    storms++;
}

static void *stormer(void *arg) {
    (void)arg;
    while (storming) {
        pthread_kill(main_thread, SIGBUS);
        usleep(20);
    }
    return NULL;
}

/* The program's own faulting function (a store through p). */
__attribute__((noinline)) void crash_here(volatile long *p, long v) {
    p[1] = v;
}

__attribute__((noinline)) long work(const char *which) {
    long sum = 0;
    if (strncmp(which, "safefetch", 9) == 0) {
        long faults = 0, probes = which[9] == ':' ? atol(which + 10) : PROBES;
        for (long i = 0; i < probes; i++) {
            int ok = -1;
            const long *p = (i % 3 == 0) ? (const long *)(bad + 8 * (i % 64)) : &good[i % 64];
            long v = probe_read(p, &ok);
            if (ok)
                sum += v;
            else
                faults++;
        }
        printf("safefetch: sum %ld, faults %ld, mismatches %ld\n", sum, faults, mismatches);
    } else if (strcmp(which, "retry") == 0) {
        for (long i = 0; i < 50; i++) {
            char *page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (page == MAP_FAILED)
                return -1;
            int ok = -1;
            sum += probe_read((const long *)(page + 8 * (i % 64)), &ok) + ok;
            munmap(page, 4096);
        }
        printf("retry: sum %ld\n", sum);
    } else if (strcmp(which, "storm") == 0) {
        unsigned long x = 1;
        for (long i = 0; i < 20000; i++) {
            x = x * 6364136223846793005UL + (unsigned long)i;
            sum += (long)(x >> 33) % 1000;
            good[i % 64] += sum & 7;
        }
        printf("storm: %ld %ld\n", sum, good[5]);
    } else {
        jumping = 1;
        for (long i = 0; i < 20; i++) {
            if (sigsetjmp(jump, 1) == 0) {
                if (i % 2)
                    crash_here((volatile long *)bad, i);
                else
                    sum += (long)strlen(bad + i);
            }
        }
        jumping = 0;
        printf("dladdr: done\n");
    }
    return sum;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: faultctx safefetch[:PROBES]|dladdr|retry|storm\n");
        return 2;
    }
    bad = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (bad == MAP_FAILED)
        return 2;
    for (int i = 0; i < 64; i++)
        good[i] = i * 7 + 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_flags = SA_SIGINFO;
    if (strncmp(argv[1], "safefetch", 9) == 0)
        sa.sa_sigaction = on_safefetch;
    else if (strcmp(argv[1], "retry") == 0)
        sa.sa_sigaction = on_retry;
    else
        sa.sa_sigaction = on_crash;
    sigaction(SIGSEGV, &sa, NULL);
    pthread_t t;
    int storm = strcmp(argv[1], "storm") == 0;
    if (storm) {
        sa.sa_sigaction = on_storm;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigaction(SIGBUS, &sa, NULL);
        main_thread = pthread_self();
        /* The stormer's calls bound now: a lazy binding in it while the
         * traced thread binds printf would change what the loader reads
         * there (its one-entry lookup cache), by timing. */
        pthread_kill(main_thread, 0);
        usleep(1);
        storming = 1;
        if (pthread_create(&t, NULL, stormer, NULL) != 0)
            return 2;
    }
    long r = work(argv[1]);
    if (storm) {
        storming = 0;
        pthread_join(t, NULL);
    }
    printf("result %ld\n", r);
    return 0;
}
