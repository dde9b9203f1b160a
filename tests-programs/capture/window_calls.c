/* window_calls.c - two worker threads run `spin` from start to end while
 * the main thread calls `frame` six times (with untraced work between the
 * calls): captured with `--function frame --calls K --threads all`, each
 * window starts the workers again, often while they are still leaving
 * translated code after the window before.
 *
 * Usage: window_calls. Prints the sum `frame` computed.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

static volatile int quit;
static volatile unsigned long count[2][8] __attribute__((aligned(64)));
static volatile unsigned long sum;

__attribute__((noinline)) void spin(int id) {
    while (!quit) count[id][0]++;
}

static void *worker(void *arg) {
    spin((int)(long)arg);
    return NULL;
}

__attribute__((noinline)) void frame(void) {
    for (int i = 0; i < 20000; i++) sum += (unsigned long)i;
    for (int i = 0; i < 3; i++) sched_yield();
}

int main(void) {
    pthread_t t[2];
    for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    for (int k = 0; k < 6; k++) {
        frame();
        for (volatile int j = 0; j < 1000000; j++) {
        }
    }
    quit = 1;
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    printf("%lu\n", sum);
    return 0;
}
