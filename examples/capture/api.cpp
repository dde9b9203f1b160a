// api.cpp: a C++ program that captures one region with coldcache's RAII guard.
//
// Build: g++ -O1 -g -I../../include api.cpp -L../../target/release -lcoldcache -o api_cpp
// Run:   LD_LIBRARY_PATH=../../target/release ./api_cpp [dump]
#include <cstdio>
#include <vector>
#include "coldcache.h"

struct Particle { float x, vx; bool alive; char pad[52]; };

__attribute__((noinline)) static float integrate(std::vector<Particle> &ps) {
    float sum = 0;
    for (auto &p : ps)
        if (p.alive) { p.x += p.vx; sum += p.x; }
    return sum;
}

int main(int argc, char **argv) {
    std::vector<Particle> ps(4096);
    for (size_t i = 0; i < ps.size(); i++) { ps[i].vx = 1.0f; ps[i].alive = i % 3 != 0; }
    coldcache_options o;
    coldcache_options_init(&o);
    o.cache = "jaguar";
    if (argc > 1) o.output = argv[1];
    float s;
    {
        coldcache::Capture capture(&o);
        if (!capture.ok()) { std::fprintf(stderr, "capture failed: %s\n", coldcache_last_error()); return 1; }
        s = integrate(ps);
    }
    std::printf("sum %.0f\n", s);
    return 0;
}
