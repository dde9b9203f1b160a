/* finish.c - hostile-program test: an asynchronous fatal signal arrives
 * while the capture is being written.
 *
 * Usage: finish
 * When libcoldcache.so is loaded (`coldcache record -- finish`, found with
 * dlsym: the same binary runs plain) main starts a capture of itself with
 * the options `record` was given, works, prints a checksum, arms a 2 ms
 * SIGALRM (left at SIG_DFL) and stops the capture: the alarm fires while
 * the dump is written. Plain, it spins instead. Either way the program
 * dies of SIGALRM (status 142) after printing the checksum.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <sys/time.h>
#include <time.h>

static volatile unsigned long sink;

int main(void)
{
    int (*start)(const void *) = (int (*)(const void *))dlsym(RTLD_DEFAULT, "coldcache_start");
    int (*stop)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "coldcache_stop");
    if (start && start(NULL) != 0) {
        fprintf(stderr, "coldcache_start failed\n");
        return 1;
    }
    unsigned long s = 0;
    for (unsigned long i = 0; i < 2000; i++)
        s = s * 31 + i;
    printf("checksum %lu\n", s);
    fflush(stdout);
    struct itimerval t = {.it_value = {.tv_sec = 0, .tv_usec = 2000}};
    setitimer(ITIMER_REAL, &t, NULL);
    if (start && stop)
        stop();
    /* The alarm ends the program; at most 10 s. */
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        sink++;
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (now.tv_sec - t0.tv_sec < 10);
    printf("no alarm\n");
    return 0;
}
