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
 *   dlswap     ./libswapa.so (loaded and called before the capture, so its
 *              code is translated) is called, closed, and ./libswapb.so
 *              (same layout, another value) opened in its place and called:
 *              code run from stale translations would return A's value.
 *              Prints whether B landed at A's address
 *   spawn      posix_spawn, fork (the child computes, reports its result
 *              and its trap flag down a pipe and calls exit(): atexit
 *              handlers run in it) and vfork (the child writes the parent's
 *              memory and calls _exit) while the capture runs; the
 *              children's results and exit statuses are printed
 *   blocked    a reader (read on a pipe) and a waiter (futex wait) blocked
 *              before the capture starts, another pair that blocks during
 *              it; the capture stops while all four are blocked, then they
 *              are woken and joined
 *   patch      code of the program itself (a function alone on its page of
 *              .text, so mapped from the file at the start) is called,
 *              made writable, patched (another constant), called again,
 *              patched once more with no system call in between and called:
 *              stale translations would return the old constants
 *   jumpout    a worker spinning in translated code gets SIGUSR1, whose
 *              handler siglongjmps out; after the stop, a second capture
 *              (dump numbered .2) in which the worker computes: it must be
 *              traced again
 *   startstop  captures started and stopped in one process (1000, or the
 *              count given after DUMP)
 * Prints the same lines with and without capture; the work is the same
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
#include <spawn.h>
#include <sys/wait.h>
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

extern char **environ;

/* dlswap: the library loaded before the capture. */
static void *swap_a;
static int (*swap_fn)(int);

/* blocked: two pipes and a condition variable the blocked threads wait on. */
static int pipes[2][2];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int go, waiting;
static pthread_t blocked_threads[4];
static uint64_t blocked_results[4];

static void *reader(void *arg) {
    int i = (int)(intptr_t)arg;
    uint64_t v = 0;
    ssize_t n;
    do n = read(pipes[i / 2][0], &v, sizeof v); while (n < 0 && errno == EINTR);
    blocked_results[i] = work(v, 1000);
    return NULL;
}

static void *waiter(void *arg) {
    int i = (int)(intptr_t)arg;
    pthread_mutex_lock(&mu);
    waiting++;
    while (!go) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    blocked_results[i] = work((uint64_t)i, 1000);
    return NULL;
}

/* Starts reader and waiter number `pair` and returns once both block (the
 * waiter is counted in the mutex; the reader is given 20 ms to reach read,
 * where it stays whatever happens since its pipe is empty). */
static void block_pair(int pair) {
    if (pipe(pipes[pair]) != 0) exit(3);
    pthread_create(&blocked_threads[2 * pair], NULL, reader, (void *)(intptr_t)(2 * pair));
    pthread_create(&blocked_threads[2 * pair + 1], NULL, waiter, (void *)(intptr_t)(2 * pair + 1));
    for (;;) {
        pthread_mutex_lock(&mu);
        int n = waiting;
        pthread_mutex_unlock(&mu);
        if (n == pair + 1) break;
        usleep(1000);
    }
    usleep(20000);
}

/* patch: alone on its page; starts with `mov eax, 1` (B8 imm32). */
__attribute__((noinline, aligned(4096), section(".text.patchme"))) int patch_me(void) {
    int r;
    __asm__ volatile("mov $1, %0" : "=a"(r));
    return r;
}

static uint64_t patch_case(void) {
    /* volatile: the compiler sees patch_me read no memory and would drop
     * the stores as dead. */
    volatile unsigned char *code = (volatile unsigned char *)patch_me;
    if (code[0] != 0xB8) { fprintf(stderr, "patch_me does not start with mov eax\n"); exit(3); }
    uint64_t s = 0;
    for (int i = 0; i < 50; i++) s += (uint64_t)patch_me();
    uintptr_t pagestart = (uintptr_t)code & ~(uintptr_t)(page - 1);
    if (mprotect((void *)pagestart, (size_t)page, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) exit(3);
    code[1] = 2; /* after a system call */
    for (int i = 0; i < 50; i++) s += (uint64_t)patch_me() << 10;
    code[1] = 3; /* with none since the last run */
    for (int i = 0; i < 50; i++) s += (uint64_t)patch_me() << 20;
    code[1] = 1;
    mprotect((void *)pagestart, (size_t)page, PROT_READ | PROT_EXEC);
    return s;
}

/* jumpout: the worker, its jump target and where it is. */
static sigjmp_buf worker_env;
static volatile sig_atomic_t worker_phase, worker_jumped;
static pthread_t jumper;
static uint64_t jumper_result;

static void on_usr1(int sig) { (void)sig; siglongjmp(worker_env, 1); }

static void *jumper_main(void *arg) {
    (void)arg;
    volatile uint64_t spin = 1;
    if (sigsetjmp(worker_env, 1) == 0) {
        worker_phase = 1;
        for (;;) spin = work(spin, 1000);
    }
    worker_jumped = 1;
    while (worker_phase != 2) usleep(1000);
    jumper_result = work(3, 100000);
    worker_phase = 3;
    return NULL;
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
    if (!strcmp(c, "dlswap")) {
        uint64_t s = 0;
        for (int i = 0; i < 100; i++) s += (uint64_t)swap_fn(i);
        void *old = (void *)swap_fn;
        dlclose(swap_a);
        void *b = dlopen("./libswapb.so", RTLD_NOW | RTLD_LOCAL);
        if (!b) { fprintf(stderr, "dlopen: %s\n", dlerror()); exit(3); }
        swap_fn = (int (*)(int))dlsym(b, "swap_value");
        printf("dlswap: B at A's address %s\n", (void *)swap_fn == old ? "yes" : "no");
        for (int i = 0; i < 100; i++) s += (uint64_t)swap_fn(i) << 20;
        dlclose(b);
        return s;
    }
    if (!strcmp(c, "spawn")) {
        pid_t pid;
        int st = -1;
        char *args[] = {"/bin/sh", "-c", "exit 3", NULL};
        if (posix_spawn(&pid, "/bin/sh", NULL, NULL, args, environ) == 0) waitpid(pid, &st, 0);
        printf("spawn: exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        int fds[2];
        if (pipe(fds) != 0) exit(3);
        fflush(stdout);
        pid = fork();
        if (pid == 0) {
            uint64_t v[2];
            v[0] = work(7, 100000);
            __asm__ volatile("pushfq\n\tpopq %0" : "=r"(v[1])); /* TF is bit 8 */
            if (write(fds[1], v, sizeof v) != sizeof v) _exit(1);
            exit(5); /* atexit handlers and destructors run in the child */
        }
        uint64_t got[2] = {0, 0};
        if (read(fds[0], got, sizeof got) != sizeof got) got[0] = 0;
        waitpid(pid, &st, 0);
        close(fds[0]); close(fds[1]);
        printf("fork: %s, child TF %d, exit %d\n", got[0] == work(7, 100000) ? "right" : "wrong",
               (int)(got[1] >> 8 & 1), WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        volatile uint64_t shared = 0;
        pid = vfork();
        if (pid == 0) {
            shared = 42; /* the parent's memory, while it waits */
            _exit(9);
        }
        waitpid(pid, &st, 0);
        printf("vfork: shared %llu, exit %d\n", (unsigned long long)shared,
               WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        return work(shared, 1000);
    }
    if (!strcmp(c, "patch")) return patch_case();
    if (!strcmp(c, "jumpout")) {
        usleep(50000); /* the worker spins, traced */
        pthread_kill(jumper, SIGUSR1);
        while (!worker_jumped) usleep(1000);
        return 0;
    }
    if (!strcmp(c, "blocked")) {
        block_pair(1); /* blocks while traced */
        return work(11, 50000);
    }
    fprintf(stderr, "unknown case %s\n", c);
    exit(2);
}

/* What a case does before the capture starts. */
static void before_case(const char *c) {
    if (!strcmp(c, "dlswap")) {
        swap_a = dlopen("./libswapa.so", RTLD_NOW | RTLD_LOCAL);
        if (!swap_a) { fprintf(stderr, "dlopen: %s\n", dlerror()); exit(3); }
        swap_fn = (int (*)(int))dlsym(swap_a, "swap_value");
        if (swap_fn(0) != 1) exit(3);
    }
    if (!strcmp(c, "blocked")) block_pair(0);
    if (!strcmp(c, "jumpout")) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_usr1;
        sigaction(SIGUSR1, &sa, NULL);
        pthread_create(&jumper, NULL, jumper_main, NULL);
        while (worker_phase != 1) usleep(1000);
    }
}

/* What a case does after the capture stopped (`o`: the capture's options
 * when capturing, else NULL). */
static uint64_t after_case(const char *c, const struct coldcache_options *o) {
    uint64_t s = 0;
    if (!strcmp(c, "jumpout")) {
        if (o && coldcache_start(o) != 0) { fprintf(stderr, "start: %s\n", coldcache_last_error()); exit(1); }
        worker_phase = 2;
        while (worker_phase != 3) usleep(1000);
        if (o && coldcache_stop() != 0) { fprintf(stderr, "stop: %s\n", coldcache_last_error()); exit(1); }
        pthread_join(jumper, NULL);
        s = jumper_result;
    }
    if (!strcmp(c, "blocked")) {
        for (int pair = 0; pair < 2; pair++) {
            uint64_t v = (uint64_t)pair + 1;
            if (write(pipes[pair][1], &v, sizeof v) != sizeof v) exit(3);
        }
        pthread_mutex_lock(&mu);
        go = 1;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
        for (int i = 0; i < 4; i++) { pthread_join(blocked_threads[i], NULL); s += blocked_results[i]; }
    }
    return s;
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
        before_case(argv[2]);
        if (capture && coldcache_start(&o) != 0) { fprintf(stderr, "start: %s\n", coldcache_last_error()); return 1; }
        s = run_case(argv[2]);
        if (capture && coldcache_stop() != 0) { fprintf(stderr, "stop: %s\n", coldcache_last_error()); return 1; }
        s += after_case(argv[2], capture ? &o : NULL);
    }
    printf("%s %llu\n", argv[2], (unsigned long long)s);
    return 0;
}
