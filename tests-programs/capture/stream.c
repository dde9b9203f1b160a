/* stream.c - a capture whose trace is far larger than its chunk buffer.
 *
 * Usage: stream ROUNDS [kill]
 * Sweeps a 512 KiB array ROUNDS times (about 115,000 instructions and
 * 33,000 data accesses a round), prints the sum on stdout and its peak
 * resident memory (VmHWM, KiB) on stderr. With `kill` it sends itself
 * SIGKILL halfway: a capture that cannot finish (its trace is left as
 * `.partial`).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long a[1 << 16];

static long peak_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            kib = atol(line + 6);
    if (f)
        fclose(f);
    return kib;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 10;
    int die = argc > 2 && strcmp(argv[2], "kill") == 0;
    long s = 0;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < (1 << 16); i += 4) {
            a[i] += r;
            s += a[i];
        }
        if (die && r == rounds / 2)
            kill(getpid(), SIGKILL);
    }
    printf("sum %ld\n", s);
    fprintf(stderr, "VmHWM %ld\n", peak_kib());
    return 0;
}
