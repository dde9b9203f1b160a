/* ownsignals.c - hostile-program test: the program uses the signals the
 * capture engine keeps for itself beyond SIGTRAP and SIGRTMIN+6 (see
 * sigtrap.c): `record`'s stop request (SIGRTMIN+7 unless the program
 * leaves it alone), and it takes the engine's signals in ways the C
 * library's `sigaction` does not see.
 *
 * Usage: ownsignals MODE  (for `record --all` or `--function work`)
 *   stop-default  reads SIGRTMIN+7's disposition back, then work() raises
 *                 it at SIG_DFL: killed by it
 *   stop-handler  work() installs a handler of SIGRTMIN+7, reading the old
 *                 disposition back, and sends itself three values with
 *                 sigqueue; the handler records them
 *   stop-wait     SIGRTMIN+7 blocked since the program started (by its
 *                 parent): prints "ready", spins in work() until a second
 *                 SIGINT (saying when the first came), then takes any SIGRTMIN+7 pending with
 *                 sigtimedwait (a program waiting for its own signal):
 *                 none natively
 *   stop-ctrlc    installs a handler of SIGRTMIN+7 that counts, prints
 *                 "ready", spins in work() until a second SIGINT (saying
 *                 when the first came): the count is 0
 *   takeover      a second thread (untraced under `--all`) takes SIGTRAP
 *                 and SIGRTMIN+6 with raw syscall(SYS_rt_sigaction)
 *                 (bypassing the C library), reading the old dispositions
 *                 back; main, after joining it, computes, raises both and
 *                 reads them back the same way
 *   takeover-asm  the same with a `syscall` instruction of its own (no
 *                 C library function at all), only for SIGTRAP, and
 *                 nothing printed about the old disposition or the traps
 *                 (the engine cannot see such a call coming: the traced
 *                 thread's next traps reach the program's handler until
 *                 the engine looks); main does not raise SIGTRAP
 *   exec-during   SIGTRAP, SIGRTMIN+6 and SIGRTMIN+7 set to SIG_IGN, then
 *                 work() execs this program in mode exec-child (inside an
 *                 `--all` capture)
 *   exec-after    the same, but main execs after work() returned (after a
 *                 `--function work` capture)
 *   exec-child    raises the three signals (ignored, inherited across
 *                 exec) and prints that it survived
 *
 * Every mode prints a checksum computed around the signals, so lost or
 * extra instructions or signals show in the output.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The kernel's struct sigaction on x86-64. */
struct ksigaction {
    void *handler;
    unsigned long flags;
    void *restorer;
    unsigned long mask;
};

static volatile int traps, rts, stops;
static volatile long values[8];
static volatile sig_atomic_t interrupted;
static char **args;

static void on_trap(int sig) { (void)sig; traps++; }
static void on_rt(int sig) { (void)sig; rts++; }
static void on_stop(int sig, siginfo_t *info, void *ctx)
{
    (void)sig;
    (void)ctx;
    if (stops < 8)
        values[stops] = info->si_code == SI_QUEUE ? (long)info->si_value.sival_ptr : -1;
    stops++;
}
static void on_int(int sig) { (void)sig; interrupted++; }

static const char *what(void (*h)(int))
{
    if (h == SIG_DFL)
        return "default";
    if (h == SIG_IGN)
        return "ignored";
    return "a handler";
}

__attribute__((noinline)) static unsigned long checksum(unsigned long n)
{
    unsigned long s = 0;
    for (unsigned long i = 0; i < n; i++)
        s = s * 31 + i;
    return s;
}

static void *taker(void *arg)
{
    (void)arg;
    /* The C library's restorer, as its sigaction gives it to a handler. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_trap;
    sigaction(SIGUSR1, &sa, NULL);
    struct ksigaction k, old;
    syscall(SYS_rt_sigaction, SIGUSR1, NULL, &k, 8);
    k.handler = (void *)on_trap;
    syscall(SYS_rt_sigaction, SIGTRAP, &k, &old, 8);
    printf("sigtrap was %s\n", what((void (*)(int))old.handler));
    k.handler = (void *)on_rt;
    syscall(SYS_rt_sigaction, SIGRTMIN + 6, &k, &old, 8);
    printf("rt6 was %s\n", what((void (*)(int))old.handler));
    return NULL;
}

static void *asm_taker(void *arg)
{
    (void)arg;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_trap;
    sigaction(SIGUSR1, &sa, NULL);
    struct ksigaction k;
    syscall(SYS_rt_sigaction, SIGUSR1, NULL, &k, 8);
    k.handler = (void *)on_trap;
    long r;
    register long r10 __asm__("r10") = 8;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "a"((long)SYS_rt_sigaction), "D"((long)SIGTRAP), "S"(&k), "d"(0L), "r"(r10)
                     : "rcx", "r11", "memory");
    printf("taken %s\n", r == 0 ? "yes" : "no");
    return NULL;
}

/* Spins until a second SIGINT; says when the first came, so that whoever
 * sends them sends the second only then (two SIGINTs pending at once
 * would be one). */
static void spin_until_interrupted(void)
{
    unsigned long s = 0;
    int said = 0;
    while (interrupted < 2) {
        s += checksum(1000);
        if (interrupted == 1 && !said) {
            printf("interrupted once\n");
            fflush(stdout);
            said = 1;
        }
    }
    printf("spun %s\n", s ? "yes" : "no");
}

__attribute__((noinline)) static void work(const char *mode)
{
    printf("sum %lu\n", checksum(1000));
    if (strcmp(mode, "stop-default") == 0) {
        fflush(stdout);
        raise(SIGRTMIN + 7);
        printf("survived\n");
    } else if (strcmp(mode, "stop-handler") == 0) {
        struct sigaction sa, old;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_stop;
        sa.sa_flags = SA_SIGINFO;
        sigaction(SIGRTMIN + 7, &sa, &old);
        printf("was %s\n", what(old.sa_handler));
        for (long v = 1; v <= 3; v++)
            sigqueue(getpid(), SIGRTMIN + 7, (union sigval){.sival_ptr = (void *)(v * 1000)});
        sigaction(SIGRTMIN + 7, NULL, &old);
        printf("now %s, %s\n", what(old.sa_handler),
               old.sa_sigaction == on_stop ? "ours" : "not ours");
        printf("stops %d: %ld %ld %ld\n", stops, values[0], values[1], values[2]);
    } else if (strcmp(mode, "stop-wait") == 0 || strcmp(mode, "stop-ctrlc") == 0) {
        printf("ready\n");
        fflush(stdout);
        spin_until_interrupted();
    } else if (strcmp(mode, "takeover") == 0) {
        pthread_t t;
        pthread_create(&t, NULL, taker, NULL);
        pthread_join(t, NULL);
        printf("sum %lu\n", checksum(5000));
        raise(SIGTRAP);
        raise(SIGRTMIN + 6);
        struct ksigaction cur;
        syscall(SYS_rt_sigaction, SIGTRAP, NULL, &cur, 8);
        printf("sigtrap now %s\n", cur.handler == (void *)on_trap ? "ours" : "not ours");
        syscall(SYS_rt_sigaction, SIGRTMIN + 6, NULL, &cur, 8);
        printf("rt6 now %s\n", cur.handler == (void *)on_rt ? "ours" : "not ours");
        printf("traps %d rts %d\n", traps, rts);
    } else if (strcmp(mode, "takeover-asm") == 0) {
        pthread_t t;
        pthread_create(&t, NULL, asm_taker, NULL);
        pthread_join(t, NULL);
        printf("sum %lu\n", checksum(5000));
    } else if (strcmp(mode, "exec-during") == 0) {
        char *argv[] = {args[0], "exec-child", NULL};
        fflush(stdout);
        execv("/proc/self/exe", argv);
        perror("execv");
    }
}

int main(int argc, char **argv)
{
    args = argv;
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "exec-child") == 0) {
        raise(SIGTRAP);
        raise(SIGRTMIN + 6);
        raise(SIGRTMIN + 7);
        printf("child survived %lu\n", checksum(100));
        return 0;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct sigaction sa;
    sigaction(SIGRTMIN + 7, NULL, &sa);
    printf("rt7 starts %s\n", what(sa.sa_handler));
    if (strcmp(mode, "stop-ctrlc") == 0 || strcmp(mode, "stop-wait") == 0) {
        signal(SIGINT, on_int);
        if (strcmp(mode, "stop-ctrlc") == 0) {
            memset(&sa, 0, sizeof sa);
            sa.sa_sigaction = on_stop;
            sa.sa_flags = SA_SIGINFO;
            sigaction(SIGRTMIN + 7, &sa, NULL);
        } else {
            sigset_t now;
            sigprocmask(SIG_BLOCK, NULL, &now);
            printf("rt7 %s\n", sigismember(&now, SIGRTMIN + 7) ? "blocked" : "not blocked");
        }
    }
    if (strncmp(mode, "exec-", 5) == 0) {
        signal(SIGTRAP, SIG_IGN);
        signal(SIGRTMIN + 6, SIG_IGN);
        signal(SIGRTMIN + 7, SIG_IGN);
    }
    work(mode);
    if (strcmp(mode, "stop-ctrlc") == 0)
        printf("own stops %d\n", stops);
    if (strcmp(mode, "stop-wait") == 0) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGRTMIN + 7);
        struct timespec zero = {0, 0};
        int got = sigtimedwait(&set, NULL, &zero);
        printf("pending %s\n", got < 0 ? "none" : "a stop request");
    }
    if (strcmp(mode, "exec-after") == 0) {
        char *child[] = {argv[0], "exec-child", NULL};
        fflush(stdout);
        execv("/proc/self/exe", child);
        perror("execv");
    }
    printf("end %lu\n", checksum(200));
    return 0;
}
