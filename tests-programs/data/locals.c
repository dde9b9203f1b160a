/* Test program for crates/types/tests/locals.rs (issue 32): parameters and
 * locals whose DWARF locations say which type a memory operand touches.
 * Compiled by the test with gcc -g at -O2 and -O0; it is never run, only
 * read. The test finds instructions by symbol and by decoding, and checks
 * the variable each one's base register or stack slot holds. */
#include <stddef.h>
#include <stdint.h>

/* The seed talk's entity: 192 bytes, the flag at offset 160. */
struct Entity {
    double pos[3];
    double vel[3];
    char name[112];
    uint16_t flags;
    char pad[30];
};
_Static_assert(sizeof(struct Entity) == 192, "Entity is 192 bytes");
_Static_assert(offsetof(struct Entity, flags) == 160, "flags at 160");

enum { kActive = 1 };

/* A sink the compiler cannot see through, so values stay live. */
__attribute__((noinline)) void consume(const void *p, const int *q)
{
    __asm__ volatile("" : : "r"(p), "r"(q) : "memory");
}

/* e is in rdi at the first instruction. */
__attribute__((noinline)) int flags_of(const struct Entity *e)
{
    return e->flags;
}

/* A loop over an array of structs through a pointer. */
__attribute__((noinline)) long count_active(const struct Entity *es, int n)
{
    long c = 0;
    for (const struct Entity *p = es; p < es + n; p++)
        if (p->flags & kActive)
            c++;
    return c;
}

/* Inlined into twice_touched: its parameter x holds a pointer, in the
 * same register as the caller's a (x, the inner scope, names it); the
 * call keeps the inlined code in order. */
static inline long touch(const struct Entity *x)
{
    long s = x->flags;
    consume(x->name, NULL);
    return s + x->flags;
}

__attribute__((noinline)) long twice_touched(const struct Entity *a)
{
    return 3 * touch(a);
}

/* q points to pointers. */
__attribute__((noinline)) int any_active(struct Entity *const *v, int n)
{
    int found = 0;
    for (struct Entity *const *q = v; q < v + n; q++)
        found |= (*q)->flags & kActive;
    return found;
}

/* e moves from rdi to a callee-saved register around the call: its
 * location is a location list. */
__attribute__((noinline)) long visit(const struct Entity *e)
{
    long s = e->flags;
    consume(e->name, NULL);
    s += e->flags;
    return s;
}

/* Another type for the same bytes. */
struct Other {
    int x;
    uint16_t more[94];
};

/* o and e are the same pointer in the same register at the same depth but
 * say different types: no answer. */
__attribute__((noinline)) int punned(struct Entity *e)
{
    struct Other *o = (struct Other *)e;
    consume(o, NULL);
    return o->more[79] + e->flags;
}

/* c and e are the same pointer in the same register at the same depth
 * and agree (const aside): struct Entity. */
__attribute__((noinline)) int aliased(struct Entity *e)
{
    const struct Entity *c = e;
    consume(c, NULL);
    return c->flags + e->flags;
}

/* A local struct and a local array in the stack frame. */
__attribute__((noinline)) int stack_user(int k)
{
    struct Entity local;
    int arr[8];
    for (int i = 0; i < 8; i++)
        arr[i] = i * k;
    local.flags = (uint16_t)k;
    consume(&local, arr);
    return local.flags + arr[3];
}

struct Entity table[4];
struct Entity *ptrs[4];

int main(void)
{
    for (int i = 0; i < 4; i++)
        ptrs[i] = &table[i];
    return flags_of(&table[0]) + (int)count_active(table, 4) + any_active(ptrs, 4) + (int)twice_touched(&table[2]) +
           (int)visit(&table[1]) + stack_user(3) + punned(&table[0]) + aliased(&table[1]);
}
