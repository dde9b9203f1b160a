/* swaplib.c - the library signals.c's `dlswap` case swaps: built twice,
 * as libswapa.so with -DVALUE=1 and libswapb.so with -DVALUE=2, so both
 * have the same layout and B is mapped where A was once A is closed.
 */
#ifndef VALUE
#define VALUE 1
#endif

int swap_value(int i) {
    volatile int v = VALUE;
    return v + (i & 0);
}
