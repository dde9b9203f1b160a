/* sigtrap.c - hostile-program test: the program uses the signals the
 * capture engine uses itself, SIGTRAP (one per single-stepped instruction)
 * and the real-time signal SIGRTMIN+6 (its thread-directed start).
 *
 * Usage: sigtrap MODE  (for `record --function work`: main does its set-up
 * before the capture, work() runs inside it)
 *   before   main installs handlers of SIGTRAP and SIGRTMIN+6; work()
 *            executes int3 three times, raises SIGTRAP (raise, kill,
 *            pthread_kill), sends itself SIGRTMIN+6 with sigqueue (three
 *            values) and from a second thread, and reads both
 *            dispositions back
 *   during   the same, the handlers installed by work() (inside the
 *            capture), one with SA_RESETHAND and one on an alternate stack
 *            set by work()
 * Dispositions and the alternate stack are read back at each step, in
 * work() (traced; with `during` also with a raw rt_sigaction) and in main
 * after it (no longer traced).
 *   ignore   work() sets both to SIG_IGN, raises both, reads them back
 *   mask     work() blocks both, reads the mask back, raises both (held
 *            pending: sigpending shows them), then unblocks: the handlers
 *            run then, in signal order
 *   trap     work() leaves SIGTRAP at SIG_DFL and executes int3: killed by
 *            SIGTRAP (status 133, core)
 *   rt       work() leaves SIGRTMIN+6 at SIG_DFL and raises it: killed by
 *            that signal
 *
 * Every mode prints a checksum computed around the signals, so lost or
 * extra instructions or signals show in the output.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile int traps, rts;
static volatile int codes[16];
static volatile long values[16];
static volatile int on_alt;
static char altstack[1 << 16];

static void on_trap(int sig, siginfo_t *info, void *ctx)
{
    (void)sig;
    (void)ctx;
    stack_t ss;
    sigaltstack(NULL, &ss);
    if (ss.ss_flags & SS_ONSTACK)
        on_alt++;
    if (traps < 16)
        codes[traps] = info->si_code;
    traps++;
}

static void on_rt(int sig, siginfo_t *info, void *ctx)
{
    (void)sig;
    (void)ctx;
    if (rts < 16)
        values[rts] = info->si_code == SI_QUEUE ? (long)info->si_value.sival_int : -1;
    rts++;
}

static void plain_trap(int sig)
{
    (void)sig;
    traps++;
}

static const char *what(void (*h)(int))
{
    if (h == SIG_DFL)
        return "default";
    if (h == SIG_IGN)
        return "ignored";
    if (h == (void (*)(int))on_trap)
        return "on_trap";
    if (h == (void (*)(int))on_rt)
        return "on_rt";
    if (h == plain_trap)
        return "plain_trap";
    return "something else";
}

static void install(int flags)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_trap;
    sa.sa_flags = SA_SIGINFO | flags;
    sigaddset(&sa.sa_mask, SIGUSR1);
    sigaction(SIGTRAP, &sa, NULL);
    sa.sa_sigaction = on_rt;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGRTMIN + 6, &sa, NULL);
}

static void show(const char *when)
{
    struct sigaction old;
    sigaction(SIGTRAP, NULL, &old);
    printf("%s: SIGTRAP %s, flags %#x, mask has SIGUSR1 %d\n", when,
           what(old.sa_handler), (unsigned)old.sa_flags, sigismember(&old.sa_mask, SIGUSR1));
    sigaction(SIGRTMIN + 6, NULL, &old);
    printf("%s: SIGRTMIN+6 %s, flags %#x\n", when, what(old.sa_handler), (unsigned)old.sa_flags);
    stack_t ss;
    sigaltstack(NULL, &ss);
    printf("%s: alternate stack %s, flags %d, size %zu\n", when,
           ss.ss_sp == altstack ? "ours" : ss.ss_sp ? "another" : "none", ss.ss_flags, ss.ss_size);
}

/* The disposition as the kernel reports it to a raw rt_sigaction (no C
 * library in between): traced threads' raw calls are emulated too. */
static void show_raw(const char *when)
{
    unsigned long k[4] = {0};
    syscall(SYS_rt_sigaction, SIGTRAP, NULL, k, 8);
    printf("%s: raw SIGTRAP %s, flags %#lx, mask %#lx\n", when, what((void (*)(int))k[0]), k[1],
           k[3]);
}

static unsigned long spin(int n)
{
    unsigned long s = 0;
    for (int i = 0; i < n; i++)
        s = s * 31 + (unsigned long)i;
    return s;
}

static void *sender(void *arg)
{
    (void)arg;
    union sigval v = {.sival_int = 99};
    sigqueue(getpid(), SIGRTMIN + 6, v);
    return NULL;
}

static void noisy(void)
{
    unsigned long s = spin(1000);
    __asm__ volatile("int3");
    s += spin(10);
    __asm__ volatile("int3" ::: "memory");
    s += spin(10);
    __asm__ volatile("int3" ::: "memory");
    raise(SIGTRAP);
    kill(getpid(), SIGTRAP);
    pthread_kill(pthread_self(), SIGTRAP);
    for (int i = 0; i < 3; i++) {
        union sigval v = {.sival_int = i + 1};
        sigqueue(getpid(), SIGRTMIN + 6, v);
        s += spin(10);
    }
    /* One from another thread, which the process receives (this thread:
     * the sender blocks nothing, but it is gone once joined). */
    sigset_t rt, old;
    sigemptyset(&rt);
    sigaddset(&rt, SIGRTMIN + 6);
    pthread_sigmask(SIG_BLOCK, &rt, &old);
    pthread_t t;
    pthread_create(&t, NULL, sender, NULL);
    pthread_join(t, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    printf("checksum %lu\n", s + spin(100));
}

static void report(void)
{
    printf("SIGTRAP handled %d times, codes:", traps);
    for (int i = 0; i < traps && i < 16; i++)
        printf(" %d", codes[i]);
    printf("\nSIGRTMIN+6 handled %d times, values:", rts);
    for (int i = 0; i < rts && i < 16; i++)
        printf(" %ld", values[i]);
    printf("\non the alternate stack %d times\n", on_alt);
}

__attribute__((noinline)) int work(const char *mode)
{
    if (strcmp(mode, "before") == 0) {
        noisy();
        show("after");
        report();
        return 0;
    }
    if (strcmp(mode, "during") == 0) {
        show("before");
        stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack};
        sigaltstack(&ss, NULL);
        install(SA_ONSTACK);
        show("installed");
        show_raw("installed");
        noisy();
        /* SA_RESETHAND: the first SIGTRAP resets it to SIG_DFL. */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = plain_trap;
        sa.sa_flags = SA_RESETHAND;
        sigaction(SIGTRAP, &sa, NULL);
        show("oneshot");
        raise(SIGTRAP);
        show("after");
        show_raw("after");
        printf("signal(SIGTRAP) returned %s\n", what(signal(SIGTRAP, plain_trap)));
        printf("signal(SIGTRAP) returned %s\n", what(signal(SIGTRAP, SIG_IGN)));
        raise(SIGTRAP);
        report();
        return 0;
    }
    if (strcmp(mode, "ignore") == 0) {
        signal(SIGTRAP, SIG_IGN);
        signal(SIGRTMIN + 6, SIG_IGN);
        raise(SIGTRAP);
        kill(getpid(), SIGRTMIN + 6);
        show("ignored");
        printf("checksum %lu\n", spin(1000));
        return 0;
    }
    if (strcmp(mode, "mask") == 0) {
        install(0);
        sigset_t both, got, pend;
        sigemptyset(&both);
        sigaddset(&both, SIGTRAP);
        sigaddset(&both, SIGRTMIN + 6);
        sigprocmask(SIG_BLOCK, &both, NULL);
        sigprocmask(SIG_BLOCK, NULL, &got);
        printf("blocked: SIGTRAP %d, SIGRTMIN+6 %d\n", sigismember(&got, SIGTRAP),
               sigismember(&got, SIGRTMIN + 6));
        raise(SIGTRAP);
        union sigval v = {.sival_int = 7};
        sigqueue(getpid(), SIGRTMIN + 6, v);
        unsigned long s = spin(1000);
        sigpending(&pend);
        printf("pending: SIGTRAP %d, SIGRTMIN+6 %d; handled so far %d %d\n",
               sigismember(&pend, SIGTRAP), sigismember(&pend, SIGRTMIN + 6), traps, rts);
        sigprocmask(SIG_UNBLOCK, &both, NULL);
        sigprocmask(SIG_BLOCK, NULL, &got);
        printf("unblocked: SIGTRAP %d, SIGRTMIN+6 %d\n", sigismember(&got, SIGTRAP),
               sigismember(&got, SIGRTMIN + 6));
        sigpending(&pend);
        printf("pending: SIGTRAP %d, SIGRTMIN+6 %d\n", sigismember(&pend, SIGTRAP),
               sigismember(&pend, SIGRTMIN + 6));
        printf("checksum %lu\n", s);
        report();
        return 0;
    }
    if (strcmp(mode, "trap") == 0) {
        signal(SIGTRAP, SIG_DFL);
        printf("checksum %lu\n", spin(1000));
        fflush(stdout);
        __asm__ volatile("int3");
        printf("survived int3\n");
        return 0;
    }
    if (strcmp(mode, "rt") == 0) {
        printf("checksum %lu\n", spin(1000));
        fflush(stdout);
        raise(SIGRTMIN + 6);
        printf("survived SIGRTMIN+6\n");
        return 0;
    }
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *mode = argc > 1 ? argv[1] : "before";
    if (strcmp(mode, "before") == 0) {
        install(0);
        show("before");
    }
    int r = work(mode);
    if (strcmp(mode, "before") == 0 || strcmp(mode, "during") == 0)
        show("main");
    fflush(stdout);
    return r;
}
