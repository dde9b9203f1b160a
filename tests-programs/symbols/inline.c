/* Resolver test program (crates/cli/tests/resolve.rs): built -O2 -g, its
 * static inline helpers are inlined into work() (two levels deep), and work
 * calls getenv and qsort in libc. `record --function work` captures it. */
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static inline int square(int x)
{
    return x * x;
}

static inline int sum_squares(const int *v, int n)
{
    int s = 0;
    for (int i = 0; i < n; i++)
        s += square(v[i]);
    return s;
}

__attribute__((noinline)) int work(int *v, int n)
{
    const char *e = getenv("COLDCACHE_TEST_UNSET_VARIABLE");
    qsort(v, n, sizeof *v, cmp);
    memset(v + n, 0, 4 * sizeof *v);
    return sum_squares(v, n) + (e != 0);
}

int main(int argc, char **argv)
{
    int v[64];
    for (int i = 0; i < 60; i++)
        v[i] = (i * 37 + argc) % 61;
    (void)argv;
    return work(v, 60) == 12345 ? 1 : 0;
}
