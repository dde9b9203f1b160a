/* smallstack.c - hostile-program test: small stacks under capture.
 *
 * Usage: smallstack api|none [THREADS [DEPTH [syscall]]]   (run under `ulimit -s 64`)
 *        smallstack overflow
 *        smallstack thread
 * main uses about 24 KiB of its stack, then, with `api` and when
 * libcoldcache.so is loaded (`coldcache record -- smallstack api`, found
 * with dlsym: the same binary runs plain), starts a capture with the options `record` was
 * given (coldcache_start(NULL); `--threads all` traces the workers), and
 * creates THREADS (default 4) threads with 16 KiB stacks, one after the
 * other, each using about 10 KiB of it; then stops the capture and prints
 * what every thread computed. With `none` under `record --all` the
 * capture is armed in the library's constructor, on the 64 KiB main
 * stack, and covers main. DEPTH sets the workers' recursion (about 256
 * bytes a level; 40 by default). With `syscall`, the workers make a system
 * call (getppid) at the bottom of the recursion, where fast mode hands
 * them to the trap engine: its signal frame lands at their deepest point.
 *
 * `overflow` prints, then recurses without end on the main thread, which
 * has no alternate signal stack: killed by SIGSEGV.
 *
 * `thread` (under `record` with the API trigger) starts and stops the
 * capture from a thread with a 16 KiB stack, which recurses about 5 KiB
 * deep in between (preparing a capture took 35 to 54 KiB
 * of the caller's stack: killed by SIGSEGV).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int sys_at_bottom;

/* About `depth` * 256 bytes of stack, touched. */
__attribute__((noinline)) static unsigned long deep(int depth, unsigned long seed)
{
    volatile unsigned char pad[224];
    for (unsigned i = 0; i < sizeof pad; i += 32)
        pad[i] = (unsigned char)(seed + i);
    if (depth == 0)
        return sys_at_bottom ? seed + (syscall(SYS_getppid) > 0) : seed;
    unsigned long r = deep(depth - 1, seed * 31 + 7);
    return r + pad[32];
}

static int depth = 40;

static void *worker(void *arg)
{
    unsigned long n = (unsigned long)arg;
    return (void *)deep(depth, n); /* ~10 KiB by default */
}

static void *api_worker(void *arg)
{
    int (*start)(const void *) = (int (*)(const void *))dlsym(RTLD_DEFAULT, "coldcache_start");
    int (*stop)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "coldcache_stop");
    if (start && start(NULL) != 0)
        return NULL;
    unsigned long r = deep(20, (unsigned long)arg);
    if (start && stop() != 0)
        return NULL;
    return (void *)r;
}

__attribute__((noinline)) static unsigned long bottomless(unsigned long n)
{
    volatile unsigned char pad[224];
    pad[n % sizeof pad] = (unsigned char)n;
    return bottomless(n + 1) + pad[0];
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "overflow") == 0) {
        printf("main %lu\n", deep(96, 1));
        fflush(stdout);
        return (int)bottomless(0);
    }
    if (argc > 1 && strcmp(argv[1], "thread") == 0) {
        pthread_attr_t a;
        pthread_t t;
        void *r;
        pthread_attr_init(&a);
        if (pthread_attr_setstacksize(&a, 16384) != 0 ||
            pthread_create(&t, &a, api_worker, (void *)5UL) != 0) {
            fprintf(stderr, "no 16 KiB thread\n");
            return 1;
        }
        pthread_join(t, &r);
        printf("thread %lu\n", (unsigned long)r);
        return r ? 0 : 1;
    }
    int api = argc > 1 && strcmp(argv[1], "api") == 0;
    int threads = argc > 2 ? atoi(argv[2]) : 4;
    if (argc > 3)
        depth = atoi(argv[3]);
    sys_at_bottom = argc > 4 && strcmp(argv[4], "syscall") == 0;
    unsigned long s = deep(96, 1); /* ~24 KiB of the 64 KiB stack */
    printf("main %lu\n", s);
    int (*start)(const void *) = (int (*)(const void *))dlsym(RTLD_DEFAULT, "coldcache_start");
    int (*stop)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "coldcache_stop");
    if (!api)
        start = NULL;
    if (start && start(NULL) != 0) {
        fprintf(stderr, "coldcache_start failed\n");
        return 1;
    }
    pthread_attr_t a;
    pthread_attr_init(&a);
    if (pthread_attr_setstacksize(&a, 16384) != 0) {
        fprintf(stderr, "no 16 KiB stacks\n");
        return 1;
    }
    for (int i = 0; i < threads; i++) {
        pthread_t t;
        void *r;
        if (pthread_create(&t, &a, worker, (void *)(unsigned long)(i + 2)) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            return 1;
        }
        pthread_join(t, &r);
        printf("thread %d %lu\n", i, (unsigned long)r);
    }
    s = deep(96, 3);
    if (start)
        stop();
    printf("main again %lu\n", s);
    return 0;
}
