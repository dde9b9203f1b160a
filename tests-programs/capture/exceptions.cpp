/* exceptions.cpp - C++ exceptions thrown and caught across captured frames.
 *
 * Usage: exceptions plain|coldcache [DUMP]
 * One capture of the calling thread, started three frames below main (in
 * `begin`), holds:
 *   - 12 throws from the bottom of a recursion of depth 1..12 whose frames
 *     hold destructors (they add to a sum as the stack unwinds), caught at
 *     the top, some rethrown from a middle frame on the way;
 *   - a std::out_of_range thrown by the library (vector::at) and caught;
 *   - a throw that unwinds past the frame the capture started in, caught in
 *     main, after which the capture is stopped.
 * Prints the same lines with and without capture.
 */
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>
#include "coldcache.h"

static uint64_t unwound;
static bool capture;

struct Guard {
    uint64_t v;
    explicit Guard(uint64_t x) : v(x) {}
    ~Guard() { unwound = unwound * 31 + v; }
};

struct Thrown {
    int depth;
};

__attribute__((noinline)) static uint64_t dive(int depth, int bottom) {
    Guard g((uint64_t)depth * 7 + (uint64_t)bottom);
    if (depth == bottom) {
        if (bottom % 3 == 0) throw std::runtime_error("bottom");
        throw Thrown{depth};
    }
    if (depth == bottom / 2 && bottom % 2 == 0) {
        try {
            return dive(depth + 1, bottom) + 1;
        } catch (Thrown &t) {
            t.depth += 100;
            throw; /* rethrown from the middle */
        }
    }
    return dive(depth + 1, bottom) + 1;
}

static uint64_t storms(void) {
    uint64_t s = 0;
    for (int i = 0; i < 12; i++) { /* each depth once (a throw costs ~80,000 steps in trap mode) */
        try {
            s += dive(0, 1 + i % 12);
        } catch (const Thrown &t) {
            s += (uint64_t)t.depth;
        } catch (const std::exception &e) {
            s += std::strlen(e.what());
        }
    }
    std::vector<int> v(3, 1);
    try {
        s += (uint64_t)v.at(7);
    } catch (const std::out_of_range &) {
        s += 1000;
    }
    return s;
}

__attribute__((noinline)) static void begin(const coldcache_options *o) {
    if (capture && coldcache_start(o) != 0) {
        std::fprintf(stderr, "start: %s\n", coldcache_last_error());
        throw 1;
    }
    uint64_t s = storms();
    std::printf("storms %llu unwound %llu\n", (unsigned long long)s,
                (unsigned long long)unwound);
    Guard g(5);
    throw Thrown{-1}; /* past the frame the capture started in */
}

__attribute__((noinline)) static void middle(const coldcache_options *o) {
    Guard g(3);
    begin(o);
}

int main(int argc, char **argv) {
    capture = argc > 1 && !std::strcmp(argv[1], "coldcache");
    coldcache_options o;
    coldcache_options_init(&o);
    o.cache = "cachegrind";
    o.output = argc > 2 ? argv[2] : "exceptions.ccdump";
    try {
        middle(&o);
    } catch (const Thrown &t) {
        std::printf("caught in main: depth %d unwound %llu\n", t.depth,
                    (unsigned long long)unwound);
    } catch (int) {
        return 1;
    }
    if (capture && coldcache_stop() != 0) {
        std::fprintf(stderr, "stop: %s\n", coldcache_last_error());
        return 1;
    }
    return 0;
}
