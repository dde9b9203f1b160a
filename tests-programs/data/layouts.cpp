// The data view's layouts and globals rule (crates/types/tests/layouts.rs):
// types whose layouts the test states by hand, global and static variables
// of them, and one small function per access, each reading one field of a
// global through a rip-relative (PIE) or absolute (non-PIE) operand.
// Build: g++ -g -O2 (and -fno-pie -no-pie; and -gdwarf-2 -gstrict-dwarf).
#include <cstddef>
#include <cstdint>
#include <cstdio>

namespace game {
struct Vec3 {
    float x, y, z;  // 0, 4, 8; sizeof 12
};
// The seed talk's entity: 192 bytes, the flag at +160.
struct Entity {
    Vec3 pos;             // 0
    Vec3 vel;             // 12
    uint64_t id;          // 24
    char name[128];       // 32
    uint16_t flags;       // 160
    uint8_t spare[30];    // 162
};
static_assert(sizeof(Entity) == 192, "Entity is 192 bytes");
static_assert(offsetof(Entity, flags) == 160, "flags at 160");
}  // namespace game

struct Particle {
    float p[3];  // 0
    int life;    // 12
};
struct Emitter {
    int count;             // 0
    Particle parts[4];     // 4 (an array of structs)
    game::Vec3 origin;     // 68 (a nested struct)
};
struct Base {
    int id;      // 0
    short kind;  // 4
};
struct Derived : Base {
    double weight;  // 8
    int tags[2];    // 16
};
union Value {
    int32_t i;
    double d;
    char bytes[8];
};
struct Flags {
    unsigned a : 3;      // bits 0-2
    unsigned b : 7;      // bits 3-9
    unsigned c : 10;     // bits 10-19
    unsigned char tail;  // byte 3
};
struct Tagged {
    int kind;  // 0
    union {    // 4, anonymous
        float f;
        int n;
    };
};

typedef struct {
    int lock;   // 0
    int count;  // 4
} Lock;  // an anonymous struct named by its typedef

game::Entity entities[8192];
Lock lock_g;
Emitter emitter;
Derived derived;
Value value;
Flags flags_g;
Tagged tagged;
static Particle table[16];
static int counts[64];

#define PROBE extern "C" __attribute__((noinline))
PROBE int read_flag5() { return entities[5].flags; }
PROBE float read_part() { return emitter.parts[2].p[1]; }
PROBE float read_origin_y() { return emitter.origin.y; }
PROBE double read_weight() { return derived.weight; }
PROBE int read_base_kind() { return derived.kind; }
PROBE double read_value_d() { return value.d; }
PROBE int read_value_i() { return value.i; }
PROBE float read_tagged_f() { return tagged.f; }
PROBE int read_flags_tail() { return flags_g.tail; }
PROBE int read_table_life(int i) { return table[i].life; }
PROBE int read_count(int i) { return counts[i]; }
PROBE int read_lock_count() { return lock_g.count; }

int main(int argc, char **) {
    entities[5].flags = (uint16_t)argc;
    table[argc].life = argc;
    counts[argc] = argc;
    emitter.parts[2].p[1] = 1.5f;
    int s = read_flag5() + (int)read_part() + (int)read_origin_y() + (int)read_weight() +
            read_base_kind() + (int)read_value_d() + read_value_i() + (int)read_tagged_f() +
            read_flags_tail() + read_table_life(argc) + read_count(argc) + read_lock_count();
    std::printf("%d\n", s);
    return 0;
}
