/* stack.c - deep recursion with a stack frame that holds a local array.
 *
 * Oracle test program for coldcache.  Each level pushes a return address,
 * callee-saved registers and a 64-byte local buffer, so the stack grows to a
 * few hundred KiB and unwinds again several times: long runs of sequential
 * stores going down and loads coming back up.
 */
#include <stdio.h>
#include <stdint.h>

#define DEPTH 2500
#ifndef ROUNDS /* a test may build a smaller run with -DROUNDS=... */
#define ROUNDS 5
#endif

static uint64_t __attribute__((noinline)) descend(int depth, uint64_t seed)
{
    volatile uint64_t local[8];
    for (int i = 0; i < 8; i++)
        local[i] = seed * (uint64_t)(i + 1) + (uint64_t)depth;
    if (depth == 0)
        return seed;
    uint64_t below = descend(depth - 1, seed * 6364136223846793005ull + 1442695040888963407ull);
    uint64_t s = below;
    for (int i = 0; i < 8; i++)
        s ^= local[i] + (s << 6) + (s >> 2);
    return s;
}

int main(void)
{
    uint64_t acc = 0;
    for (int r = 0; r < ROUNDS; r++)
        acc += descend(DEPTH - r * 100, (uint64_t)r + 1);
    printf("stack depth=%d rounds=%d acc=%llu\n", DEPTH, ROUNDS, (unsigned long long)acc);
    return 0;
}
