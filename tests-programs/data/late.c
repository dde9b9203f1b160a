/* A library the `late` case of objects.cpp loads with dlopen inside its
 * window (crates/cli/tests/data_objects.rs builds it with -shared -fPIC):
 * its data is mapped by the dynamic linker during the capture, so no
 * object the capture knew holds it when it is read. late_sum reads each
 * of late_table's 256 ints once (1 KiB, aligned to a line: 16 first-level
 * misses) and reads and writes late_calls once. */
volatile int late_table[256] __attribute__((aligned(64)));
volatile int late_calls;

int late_sum(void)
{
    int s = 0;
    for (int i = 0; i < 256; i++)
        s += late_table[i];
    late_calls = late_calls + 1;
    return s;
}
