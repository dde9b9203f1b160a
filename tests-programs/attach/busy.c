/* Four threads calling `work` in a loop, never blocking, until stdin is
 * closed (crates/cli/tests/attach.rs attaches to it with `--function work
 * --threads all`: the window opens at once, while attach's remote calls
 * still run on the main thread). `work` reads `sink` so the compiler cannot
 * call it once and keep the result. Prints "ready", then "done" at the end. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static volatile int stop;
static volatile unsigned long sink;

__attribute__((noinline)) unsigned long work(int i) {
    unsigned long s = i + sink;
    for (int k = 0; k < 1000; k++)
        s = s * 31 + k;
    return s;
}

static void *run(void *arg) {
    long i = (long)arg;
    while (!stop)
        sink += work((int)i);
    return 0;
}

int main(void) {
    pthread_t t[4];
    for (long i = 0; i < 4; i++)
        pthread_create(&t[i], 0, run, (void *)i);
    printf("ready\n");
    fflush(stdout);
    char b[8];
    while (read(0, b, sizeof b) > 0) {
    }
    stop = 1;
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], 0);
    printf("done\n");
    return 0;
}
