/* A recording cut short: "tick" zones fill a few chunks, one "nap" zone
 * sleeps 50 ms (its length measured here with CLOCK_MONOTONIC and
 * printed), the streaming writer is given time to write what is sealed,
 * then the program kills itself with SIGKILL, so no exit handler writes the
 * recording: only the streamed `.partial` is left. It must name the zones
 * and carry the clock, so the nap reads as long as it was. */
#include "coldcache.h"
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static volatile int sink;

int main(void) {
    /* 5 full chunks of 4095 events (and a bit). */
    for (int i = 0; i < 11000; i++) {
        COLDCACHE_ZONE("tick");
        sink += i;
    }
    double t0, t1;
    {
        COLDCACHE_ZONE("nap");
        t0 = now_ms();
        usleep(50000);
        t1 = now_ms();
    }
    /* Seal the chunk holding the nap's end. */
    for (int i = 0; i < 4100; i++) {
        COLDCACHE_ZONE("tick");
        sink += i;
    }
    printf("nap %.3f ms\n", t1 - t0);
    fflush(stdout);
    usleep(300000); /* the streaming writer looks every 2 ms */
    kill(getpid(), SIGKILL);
    return 0;
}
