/* signals.c - hostile program for the capture engines: signals, faults and
 * threads arriving while code is traced (translated, in fast mode).
 *
 * Usage: signals plain|coldcache CASE [DUMP [COUNT]]
 *   alarm      SIGALRM every 50 us (SA_RESTART) while computing and reading
 *              a pipe
 *   norestart  the same without SA_RESTART: interrupted reads are retried
 *   altstack   the handler runs on an alternate signal stack
 *   segv       writes to a guard page; the SIGSEGV handler opens it and
 *              returns, the faulting instruction runs again
 *   longjmp    the SIGALRM handler siglongjmps out; the interrupted chunk
 *              of work is redone
 *   threads    64 threads created and joined
 *   dlopen     libm loaded, called and unloaded
 *   startstop  captures started and stopped in one process (1000, or the
 *              count given after DUMP)
 * Prints the same line with and without capture; the work is the same
 * whatever the number of signals delivered.
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
#include <sys/time.h>
#include <unistd.h>
#include <errno.h>
#include "coldcache.h"

static volatile sig_atomic_t alarms;
static sigjmp_buf again;
static volatile int jump_armed;
static char *guard;
static long page;

static uint64_t work(uint64_t seed, int n) {
    uint64_t s = seed;
    for (int i = 0; i < n; i++) s = s * 6364136223846793005u + 1442695040888963407u + (s >> 17);
    return s;
}

static void on_alarm(int sig) {
    (void)sig;
    alarms++;
    if (jump_armed) siglongjmp(again, 1);
}

static void on_segv(int sig, siginfo_t *si, void *uc) {
    (void)sig; (void)uc;
    char *a = (char *)si->si_addr;
    if (a >= guard && a < guard + page) mprotect(guard, page, PROT_READ | PROT_WRITE);
    else abort();
}

static void timer(int on) {
    struct itimerval it;
    memset(&it, 0, sizeof it);
    if (on) { it.it_interval.tv_usec = 50; it.it_value.tv_usec = 50; }
    setitimer(ITIMER_REAL, &it, NULL);
}

static void handler(int flags) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = flags;
    sigaction(SIGALRM, &sa, NULL);
}

static uint64_t pipe_work(void) {
    int fds[2];
    if (pipe(fds) != 0) return 0;
    uint64_t s = 0;
    for (int r = 0; r < 200; r++) {
        uint64_t v = work((uint64_t)r, 2000);
        if (write(fds[1], &v, sizeof v) != sizeof v) return 0;
        uint64_t got = 0;
        ssize_t n;
        do n = read(fds[0], &got, sizeof got); while (n < 0 && errno == EINTR);
        s += got;
    }
    close(fds[0]); close(fds[1]);
    return s;
}

static void *thread_main(void *arg) {
    uint64_t *p = arg;
    *p = work(*p, 5000);
    return NULL;
}

static uint64_t run_case(const char *c) {
    if (!strcmp(c, "alarm") || !strcmp(c, "norestart")) {
        handler(!strcmp(c, "alarm") ? SA_RESTART : 0);
        timer(1);
        uint64_t s = pipe_work();
        timer(0);
        return s;
    }
    if (!strcmp(c, "altstack")) {
        stack_t ss;
        ss.ss_sp = malloc(1 << 16); ss.ss_size = 1 << 16; ss.ss_flags = 0;
        sigaltstack(&ss, NULL);
        handler(SA_RESTART | SA_ONSTACK);
        timer(1);
        uint64_t s = pipe_work();
        timer(0);
        return s;
    }
    if (!strcmp(c, "segv")) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_segv;
        sa.sa_flags = SA_SIGINFO;
        sigaction(SIGSEGV, &sa, NULL);
        guard = mmap(NULL, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        uint64_t s = 0;
        for (int i = 0; i < 100; i++) {
            mprotect(guard, page, PROT_NONE);
            ((volatile uint64_t *)guard)[i] = work((uint64_t)i, 100);
            s += ((volatile uint64_t *)guard)[i];
        }
        return s;
    }
    if (!strcmp(c, "longjmp")) {
        handler(0);
        uint64_t results[64];
        timer(1);
        for (volatile int i = 0; i < 64; i++) {
            if (sigsetjmp(again, 1) != 0) { /* interrupted: redo chunk i */ }
            jump_armed = 1;
            uint64_t r = work((uint64_t)i, 20000);
            jump_armed = 0;
            results[i] = r;
        }
        timer(0);
        uint64_t s = 0;
        for (int i = 0; i < 64; i++) s += results[i];
        return s;
    }
    if (!strcmp(c, "threads")) {
        pthread_t t[64];
        uint64_t v[64];
        for (int i = 0; i < 64; i++) { v[i] = (uint64_t)i; pthread_create(&t[i], NULL, thread_main, &v[i]); }
        uint64_t s = 0;
        for (int i = 0; i < 64; i++) { pthread_join(t[i], NULL); s += v[i]; }
        return s;
    }
    if (!strcmp(c, "dlopen")) {
        uint64_t s = 0;
        for (int r = 0; r < 3; r++) {
            void *h = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
            if (!h) return 0;
            double (*f)(double) = (double (*)(double))dlsym(h, "cos");
            s += (uint64_t)(f(0.5 * r) * 1e9);
            dlclose(h);
        }
        return s;
    }
    fprintf(stderr, "unknown case %s\n", c);
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: signals plain|coldcache CASE [DUMP]\n"); return 2; }
    page = sysconf(_SC_PAGESIZE);
    int capture = !strcmp(argv[1], "coldcache");
    struct coldcache_options o;
    coldcache_options_init(&o);
    o.threads = COLDCACHE_THREADS_ALL;
    o.cache = "cachegrind";
    o.output = argc > 3 ? argv[3] : "signals.ccdump";
    uint64_t s;
    if (!strcmp(argv[2], "startstop")) {
        s = 0;
        int count = argc > 4 ? atoi(argv[4]) : 1000;
        for (int i = 0; i < count; i++) {
            if (capture && coldcache_start(&o) != 0) { fprintf(stderr, "start: %s\n", coldcache_last_error()); return 1; }
            s += work((uint64_t)i, 200);
            if (capture && coldcache_stop() != 0) { fprintf(stderr, "stop: %s\n", coldcache_last_error()); return 1; }
        }
    } else {
        if (capture && coldcache_start(&o) != 0) { fprintf(stderr, "start: %s\n", coldcache_last_error()); return 1; }
        s = run_case(argv[2]);
        if (capture && coldcache_stop() != 0) { fprintf(stderr, "stop: %s\n", coldcache_last_error()); return 1; }
    }
    printf("%s %llu\n", argv[2], (unsigned long long)s);
    return 0;
}
