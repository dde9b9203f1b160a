/* 5,000,000 calls of leaf() from main(), built with -finstrument-functions:
 * 10,000,002 events, far more than a 16 MiB arena holds (1,048,320
 * events), so a streamed recording must reuse chunks. */
static volatile int sink;

__attribute__((noinline)) void leaf(int i) { sink += i; }

int main(void) {
    for (int i = 0; i < 5000000; i++) leaf(i);
    return 0;
}
