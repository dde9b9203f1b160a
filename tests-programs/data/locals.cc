/* Test program for crates/types/tests/locals.rs (issue 32), C++: `this`
 * and a reference parameter hold the address of a game::Entity. Compiled
 * by the test with g++ -g -O2; never run, only read. */
#include <cstddef>
#include <cstdint>

namespace game {

struct Entity {
    double pos[3];
    double vel[3];
    char name[112];
    std::uint16_t flags;
    char pad[30];

    int active() const;
};
static_assert(sizeof(Entity) == 192, "Entity is 192 bytes");
static_assert(offsetof(Entity, flags) == 160, "flags at 160");

/* `this` is in rdi. */
__attribute__((noinline)) int Entity::active() const
{
    return flags & 1;
}

/* r, a reference, is in rdi. */
__attribute__((noinline)) int flags_by_ref(const Entity &r)
{
    return r.flags;
}

} // namespace game

game::Entity g[2];

int main()
{
    return g[0].active() + game::flags_by_ref(g[1]);
}
