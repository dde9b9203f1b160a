/* matmul.c - naive (i-j-k) versus blocked matrix multiply of N x N doubles.
 *
 * Oracle test program for coldcache: deterministic, no input, prints a
 * checksum so the compiler cannot drop the work.  The naive kernel walks B
 * column-wise (one new cache line per inner iteration once B no longer fits),
 * the blocked kernel reuses BS x BS tiles.
 */
#include <stdio.h>

#ifndef N /* a test may build a smaller run with -DN=... */
#define N 48
#endif
#define BS 16

static double A[N][N], B[N][N], C1[N][N], C2[N][N];

static void init(void)
{
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            A[i][j] = (double)((i * 7 + j * 3) % 11) - 5.0;
            B[i][j] = (double)((i * 5 + j * 13) % 17) * 0.25;
        }
}

static void naive(void)
{
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            double s = 0.0;
            for (int k = 0; k < N; k++)
                s += A[i][k] * B[k][j];
            C1[i][j] = s;
        }
}

static void blocked(void)
{
    for (int ii = 0; ii < N; ii += BS)
        for (int kk = 0; kk < N; kk += BS)
            for (int jj = 0; jj < N; jj += BS)
                for (int i = ii; i < ii + BS; i++)
                    for (int k = kk; k < kk + BS; k++) {
                        double a = A[i][k];
                        for (int j = jj; j < jj + BS; j++)
                            C2[i][j] += a * B[k][j];
                    }
}

int main(void)
{
    init();
    naive();
    blocked();
    double s1 = 0.0, s2 = 0.0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            s1 += C1[i][j] * (double)(i + 1);
            s2 += C2[i][j] * (double)(i + 1);
        }
    printf("matmul N=%d naive=%.3f blocked=%.3f\n", N, s1, s2);
    return 0;
}
