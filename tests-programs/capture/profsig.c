/* profsig.c - a sampling profiler inside the program (issue 33): a SIGPROF
 * handler, armed with setitimer(ITIMER_PROF, 1 ms), reads the interrupted
 * RIP and looks it up with dladdr, as gperftools and other in-process
 * profilers do, while `work` computes for about 100 ms.
 *
 * Usage: profsig [N [quiet|storm]]: N iterations of work's loop (default
 * 60 million, about 100 ms natively); `quiet` arms no timer (the count of
 * work's instructions, for Callgrind, without the handler's); `storm`
 * adds a thread that sends SIGPROF to the main thread every 50 us
 * (pthread_kill), so that many land while it computes, wherever a
 * capture spends its time.
 *
 * Under fast capture the handler used to see code-cache addresses (no
 * object holds them). Prints the computation's result only (the same with
 * and without capture); on standard error: the samples, those dladdr
 * placed in no object, those in this program's own text, and those in a
 * file whose name says coldcache (the capture's own library).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>

static volatile long samples, nowhere, own, tool;
static const char *self;
static volatile int done;
static pthread_t main_thread;

static void *storm(void *arg)
{
    (void)arg;
    struct timespec t = {0, 50 * 1000};
    while (!done) {
        pthread_kill(main_thread, SIGPROF);
        nanosleep(&t, NULL);
    }
    return NULL;
}

static void on_prof(int sig, siginfo_t *info, void *ctx)
{
    (void)sig;
    (void)info;
    ucontext_t *uc = ctx;
    void *rip = (void *)uc->uc_mcontext.gregs[REG_RIP];
    Dl_info d;
    samples++;
    if (!dladdr(rip, &d) || !d.dli_fname) {
        nowhere++;
    } else if (self && strcmp(d.dli_fname, self) == 0) {
        own++;
    } else if (strstr(d.dli_fname, "coldcache")) {
        tool++;
    }
}

__attribute__((noinline)) uint64_t work(long n)
{
    uint64_t x = 1, s = 0;
    for (long i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        s += (x >> 33) ^ (s << 1);
    }
    return s;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 60 * 1000 * 1000;
    int quiet = argc > 2 && strcmp(argv[2], "quiet") == 0;
    int storming = argc > 2 && strcmp(argv[2], "storm") == 0;
    Dl_info d;
    if (dladdr((void *)work, &d)) {
        self = d.dli_fname;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_prof;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPROF, &sa, NULL);
    struct itimerval t = {{0, 1000}, {0, 1000}};
    pthread_t thread;
    main_thread = pthread_self();
    if (storming) {
        pthread_create(&thread, NULL, storm, NULL);
    } else if (!quiet) {
        setitimer(ITIMER_PROF, &t, NULL);
    }
    uint64_t r = work(n);
    done = 1;
    if (storming) {
        pthread_join(thread, NULL);
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &off, NULL);
    printf("%llu\n", (unsigned long long)r);
    fprintf(stderr,
            "profsig: %ld samples, %ld in no object, %ld in the program, %ld in coldcache\n",
            samples, nowhere, own, tool);
    return 0;
}
