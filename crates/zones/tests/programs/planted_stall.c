/* A program with one planted 5 ms stall: main -> run_frame -> update_world
 * -> load_asset -> stall_5ms. Everything else is quick (well under 1 ms).
 * Built with -finstrument-functions by the test `planted_stall`, which
 * checks that the spike log names exactly this chain. */
#include <time.h>

static volatile unsigned long sink;

__attribute__((noinline)) void quick_work(int n) {
    for (int i = 0; i < n; i++) sink += (unsigned long)i * 7;
}

__attribute__((noinline)) void stall_5ms(void) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        sink++;
        clock_gettime(CLOCK_MONOTONIC, &t1);
    } while ((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) < 5000000L);
}

__attribute__((noinline)) void load_asset(int planted) {
    quick_work(1000);
    if (planted) stall_5ms();
}

__attribute__((noinline)) void update_world(int frame) {
    quick_work(2000);
    load_asset(frame == 3);
}

__attribute__((noinline)) void draw(void) { quick_work(3000); }

__attribute__((noinline)) void run_frame(int frame) {
    update_world(frame);
    draw();
}

int main(void) {
    for (int f = 0; f < 6; f++) run_frame(f);
    return 0;
}
