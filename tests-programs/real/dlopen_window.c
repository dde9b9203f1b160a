/* dlopen_window.c - the captured function loads a library with dlopen and
 * runs its code: CPython importing a C extension in the window does the
 * same. The library's code was mapped after the capture started.
 *
 * Build the library from this file with -DLIBRARY -shared -fPIC, the
 * program without; run: dlopen_window ./libwork.so [N]
 * Prints the library's result (deterministic).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef LIBRARY
/* A hash table walk: loads, stores and branches in the library's code. */
uint64_t work(int n) {
    static uint32_t table[4096];
    uint64_t h = 1469598103934665603ull, sum = 0;
    for (int i = 0; i < n; i++) {
        h = (h ^ (uint64_t)i) * 1099511628211ull;
        uint32_t *slot = &table[h & 4095];
        *slot += (uint32_t)(h >> 32);
        sum += *slot;
    }
    return sum;
}
#else
#include <dlfcn.h>

__attribute__((noinline)) uint64_t run(const char *path, int n) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        exit(1);
    }
    uint64_t (*work)(int) = (uint64_t (*)(int))dlsym(lib, "work");
    if (!work) {
        fprintf(stderr, "dlsym work: %s\n", dlerror());
        exit(1);
    }
    return work(n);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: dlopen_window LIBRARY [N]\n");
        return 2;
    }
    int n = argc > 2 ? atoi(argv[2]) : 20000;
    printf("%llu\n", (unsigned long long)run(argv[1], n));
    return 0;
}
#endif
