/* fatal.c - hostile-program test: the program ends abnormally while a
 * capture runs, or handles a fatal signal itself.
 *
 * Usage: fatal MODE  (for `record --all` unless said otherwise)
 *   abort         prints, then calls abort(): killed by SIGABRT
 *   segv          prints, then stores through a null pointer: killed by
 *                 SIGSEGV
 *   term          prints "ready", then spins (at most 60 s) until another
 *                 process sends SIGTERM: killed by SIGTERM
 *   exec          prints, then execs itself in mode after-exec, which
 *                 prints and exits 7
 *   handled       installs its own SIGSEGV handler during the capture,
 *                 faults, and the handler siglongjmps back: the program
 *                 goes on, prints and exits 0
 *   query         reads back the dispositions of SIGTERM and SIGSEGV
 *                 (sigaction with no new action, then signal(), which
 *                 sets one and returns the old): SIG_DFL, as natively,
 *                 whatever the capture engine installed; then SIGTERM's
 *                 handler is the program's: it raises SIGTERM, prints from
 *                 the handler and exits 0
 *   thread-segv   (record --signal) starts a worker, prints "ready"; both
 *                 threads spin (the test starts a capture of every
 *                 thread meanwhile) until, 2 s in, the worker stores
 *                 through a null pointer: killed by SIGSEGV
 *   handled-early for `record --function frame`: main installs a SIGSEGV
 *                 handler before the capture; frame() faults inside the
 *                 capture and the handler prints and calls _exit(9)
 *
 * Every mode prints a checksum first, so lost standard output shows.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static int *volatile nowhere;
static sigjmp_buf back;

static unsigned long work(int n)
{
    unsigned long s = 0;
    for (int i = 0; i < n; i++)
        s = s * 31 + (unsigned long)i;
    return s;
}

static void to_back(int sig)
{
    (void)sig;
    siglongjmp(back, 1);
}

static void say_and_leave(int sig)
{
    static const char msg[] = "handled by the program\n";
    (void)sig;
    write(1, msg, sizeof msg - 1);
    _exit(9);
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *faulty_worker(void *arg)
{
    double t0 = *(double *)arg;
    while (seconds() - t0 < 2.0)
        sink = work(100);
    *nowhere = 1;
    return NULL;
}

static void noted(int sig)
{
    static const char msg[] = "SIGTERM reached the program's handler\n";
    (void)sig;
    write(1, msg, sizeof msg - 1);
}

static const char *what(void (*h)(int))
{
    return h == SIG_DFL ? "default" : h == SIG_IGN ? "ignored" : "a handler";
}

static void on(int sig, void (*f)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = f;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
}

__attribute__((noinline)) static void frame(void)
{
    sink = work(300);
    printf("frame %lu\n", sink);
    fflush(stdout);
    *nowhere = 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: fatal MODE\n");
        return 2;
    }
    const char *mode = argv[1];
    if (strcmp(mode, "after-exec") == 0) {
        printf("after exec %lu\n", work(20));
        return 7;
    }
    if (strcmp(mode, "handled-early") == 0) {
        on(SIGSEGV, say_and_leave);
        frame();
        return 1;
    }
    printf("main %lu\n", work(500));
    fflush(stdout);
    if (strcmp(mode, "thread-segv") == 0) {
        static double t0;
        pthread_t w;
        t0 = seconds();
        pthread_create(&w, NULL, faulty_worker, &t0);
        printf("ready\n");
        fflush(stdout);
        while (seconds() - t0 < 30.0)
            sink = work(100);
        printf("the worker never faulted\n");
        return 1;
    }
    if (strcmp(mode, "abort") == 0)
        abort();
    if (strcmp(mode, "segv") == 0) {
        *nowhere = 1;
        return 1;
    }
    if (strcmp(mode, "exec") == 0) {
        execl("/proc/self/exe", argv[0], "after-exec", (char *)NULL);
        perror("execl");
        return 1;
    }
    if (strcmp(mode, "handled") == 0) {
        on(SIGSEGV, to_back);
        if (sigsetjmp(back, 1) == 0) {
            *nowhere = 1;
            printf("not reached\n");
        }
        printf("back from the handler %lu\n", work(50));
        return 0;
    }
    if (strcmp(mode, "query") == 0) {
        struct sigaction old;
        sigaction(SIGTERM, NULL, &old);
        printf("SIGTERM: %s, flags %#x\n", what(old.sa_handler), (unsigned)old.sa_flags);
        sigaction(SIGSEGV, NULL, &old);
        printf("SIGSEGV: %s\n", what(old.sa_handler));
        printf("signal(SIGTERM) returned %s\n", what(signal(SIGTERM, noted)));
        raise(SIGTERM);
        printf("SIGTERM now %s\n", what(signal(SIGTERM, noted)));
        return 0;
    }
    if (strcmp(mode, "term") == 0) {
        printf("ready\n");
        fflush(stdout);
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do {
            sink = work(100);
            clock_gettime(CLOCK_MONOTONIC, &t);
        } while (t.tv_sec - t0.tv_sec < 60);
        printf("no SIGTERM came\n");
        return 1;
    }
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
}
