/* A program started normally (no preload) that runs frames in a loop, for
 * `coldcache attach` (crates/cli/tests/attach.rs). Every call of `frame`
 * does the same work (fixed bounds, no data-dependent branches), so the
 * instructions of one call are the same whichever call is captured. The
 * output depends only on the number of frames (argv[1], default 1500). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N 256
static float pos[N] __attribute__((aligned(64)));
static float vel[N] __attribute__((aligned(64)));

__attribute__((noinline)) float frame(int f) {
    float sum = 0;
    for (int i = 0; i < N; i++) {
        vel[i] = vel[i] * 0.5f + (float)((i * 7 + f) & 15);
        pos[i] += vel[i] * 0.01f;
        sum += pos[i];
    }
    return sum;
}

int main(int argc, char **argv) {
    int frames = argc > 1 ? atoi(argv[1]) : 1500;
    for (int i = 0; i < N; i++) {
        pos[i] = (float)i;
        vel[i] = 0;
    }
    printf("ready\n");
    fflush(stdout);
    double check = 0;
    struct timespec pause = {0, 2000000};
    for (int f = 0; f < frames; f++) {
        check += frame(f);
        if (f % 100 == 99) {
            printf("frame %d: %.3f\n", f + 1, check);
            fflush(stdout);
        }
        nanosleep(&pause, NULL);
    }
    printf("done %.3f\n", check);
    return 0;
}
