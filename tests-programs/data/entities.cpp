// The seed talk's first finding, reproduced: a 16-bit flag in the third
// cache line of a 192-byte entity ("dropped from the hot cache line into
// the cold cache line"). One frame runs two systems over 8,192 entities:
// `physics` reads and writes the first line of each (position, velocity),
// `cull` reads `flags`. With the flag at +160 every entity's third line is
// fetched from memory in `cull`: 8,192 misses in every level. Built with
// -DFLAGS_IN_HOT_LINE the flag sits at +24, in the line `physics` has just
// brought into the second level: `cull` misses the first level only.
//
// Usage: entities [frames]   (the capture's window: --function frame)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>

namespace game {

struct Vec3 {
    float x, y, z;
};

enum : uint16_t { kActive = 1, kVisible = 2 };

struct alignas(64) Entity {
    Vec3 pos;              // +0
    Vec3 vel;              // +12
#ifdef FLAGS_IN_HOT_LINE
    uint16_t flags;        // +24
    uint16_t pad0;
#else
    float radius;          // +24
#endif
    int32_t id;            // +28
    char name[32];         // +32   (line 0 ends at +64)
    float transform[16];   // +64   (line 1)
    char script[32];       // +128
#ifdef FLAGS_IN_HOT_LINE
    float radius;          // +160
#else
    uint16_t flags;        // +160  (line 2)
    uint16_t pad1;
#endif
    uint32_t team;         // +164
    uint64_t cold[3];      // +168, to 192
};
static_assert(sizeof(Entity) == 192, "three cache lines");

const int kCount = 8192;

__attribute__((noinline)) void physics(Entity *e, int n, float dt) {
    for (int i = 0; i < n; ++i) {
        e[i].pos.x += e[i].vel.x * dt;
        e[i].pos.y += e[i].vel.y * dt;
        e[i].pos.z += e[i].vel.z * dt;
    }
}

__attribute__((noinline)) int cull(const Entity *e, int n) {
    int visible = 0;
    for (int i = 0; i < n; ++i) {
        if (e[i].flags & kActive) {
            ++visible;
        }
    }
    return visible;
}

__attribute__((noinline)) int frame(Entity *e, int n) {
    physics(e, n, 1.0f / 60);
    return cull(e, n);
}

} // namespace game

int main(int argc, char **argv) {
    using game::Entity;
    int frames = argc > 1 ? std::atoi(argv[1]) : 1;
    Entity *e = new Entity[game::kCount];
    for (int i = 0; i < game::kCount; ++i) {
        e[i] = Entity{};
        e[i].id = i;
        e[i].vel = {1.0f, 2.0f, 3.0f};
        e[i].flags = (i % 3 == 0) ? game::kActive : 0;
    }
    long visible = 0;
    for (int f = 0; f < frames; ++f) {
        visible += game::frame(e, game::kCount);
    }
    std::printf("visible %ld x %.1f\n", visible, e[7].pos.x);
    delete[] e;
    return 0;
}
