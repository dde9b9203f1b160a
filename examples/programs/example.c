/* example.c - a hot field in a cold cache line.
 *
 * The program keeps 512 particles in an array and, 20 times over, counts the
 * active ones and sums their x coordinate: the loop reads `flags` for every
 * particle and `pos[0]` for the active ones (three out of four).
 *
 * Each particle is 128 bytes, two 64-byte cache lines. `pos` is in the first
 * line, but `flags` -- a 16-bit field that the hot loop reads every time --
 * was appended at the end of the struct and landed in the second line, next
 * to data that the loop never touches. So every iteration pulls in two lines
 * where one would do, and the 64 KiB array does not fit a 32 KiB L1 data
 * cache: the loop misses twice per particle on every pass.
 *
 * The fix is to move `flags` into the first line (build with -DFIXED): the
 * same loop then touches one line per particle, and its D1 read misses fall
 * from 1.75 to 1 per particle (with a 32 KiB, 64-byte-line D1).
 *
 * examples/traces/make-example.sh builds this file and records its
 * memory trace with Valgrind's lackey tool.
 */
#include <stdint.h>
#include <stdio.h>

#define N 512
#define PASSES 20
#define ACTIVE 0x1

struct particle {
#ifdef FIXED
    uint16_t flags;     /* offset 0: shares the first line with pos */
#endif
    double pos[3];      /* hot: read for active particles */
    double vel[3];      /* cold below: not used by the loop */
    double mass, charge;
    char name[48];
#ifndef FIXED
    uint16_t flags;     /* offset 112: the hot field alone in the second line */
#endif
} __attribute__((aligned(64)));

static struct particle particles[N];

static void init(void)
{
    for (int i = 0; i < N; i++) {
        particles[i].pos[0] = (double)i * 0.5;
        particles[i].pos[1] = (double)(N - i);
        particles[i].pos[2] = 1.0;
        particles[i].mass = 1.0 + (double)(i % 7);
        particles[i].flags = (i % 4 != 3) ? ACTIVE : 0;
    }
}

/* The hot loop. */
static double sum_active_x(int *count)
{
    double sum = 0.0;
    int n = 0;
    for (int i = 0; i < N; i++) {
        if (particles[i].flags & ACTIVE) {
            sum += particles[i].pos[0];
            n++;
        }
    }
    *count = n;
    return sum;
}

int main(void)
{
    init();
    double total = 0.0;
    int active = 0;
    for (int pass = 0; pass < PASSES; pass++)
        total += sum_active_x(&active);
    printf("sizeof(struct particle)=%zu offset of flags=%zu active=%d total=%.1f\n",
           sizeof(struct particle), __builtin_offsetof(struct particle, flags), active, total);
    return 0;
}
