/* exits.c - hostile-program test: the program ends while a capture runs.
 *
 * Usage: exits MODE
 *   main-exit       main does some work, prints, and calls exit(3)
 *                   (for `record --all`: main never returns)
 *   function-exit   frame() prints and calls exit(4) from inside the
 *                   captured function (for `record --function frame`)
 *   function-_exit  frame() calls _exit(5): no atexit handler runs
 *   signal-exit     waits for the trigger signal to start a capture, then
 *                   calls exit(6) while it runs (for `record --signal`)
 *   thread-exit     waiting_frame() waits forever while another thread
 *                   calls exit(8) (for `record --function waiting_frame`:
 *                   the call is cut short, unlike an exit made in it)
 *
 * Every mode prints a checksum first, so lost standard output shows.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static unsigned long work(int n)
{
    unsigned long s = 0;
    for (int i = 0; i < n; i++)
        s = s * 31 + (unsigned long)i;
    return s;
}

__attribute__((noinline)) static void frame(const char *mode)
{
    sink = work(1000);
    printf("frame %lu\n", sink);
    if (strcmp(mode, "function-exit") == 0)
        exit(4);
    fflush(stdout);
    _exit(5);
}

static void *exiter(void *arg)
{
    (void)arg;
    usleep(200000);
    printf("thread exits\n");
    exit(8);
}

__attribute__((noinline)) static void waiting_frame(void)
{
    sink = work(1000);
    printf("frame %lu\n", sink);
    fflush(stdout);
    for (;;)
        pause();
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: exits MODE\n");
        return 2;
    }
    const char *mode = argv[1];
    if (strcmp(mode, "main-exit") == 0) {
        printf("main %lu\n", work(500));
        exit(3);
    }
    if (strcmp(mode, "function-exit") == 0 || strcmp(mode, "function-_exit") == 0)
        frame(mode);
    if (strcmp(mode, "thread-exit") == 0) {
        pthread_t t;
        if (pthread_create(&t, NULL, exiter, NULL) != 0)
            return 1;
        waiting_frame();
    }
    if (strcmp(mode, "signal-exit") == 0) {
        printf("waiting %lu\n", work(10));
        fflush(stdout);
        /* The test sends the trigger once this line is printed; the
         * capture then runs while this loop spins, and exit ends it. */
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do {
            sink = work(100);
            clock_gettime(CLOCK_MONOTONIC, &t);
        } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 1500000000L);
        printf("spun %lu\n", sink);
        exit(6);
    }
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
}
