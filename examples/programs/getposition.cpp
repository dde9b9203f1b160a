// getposition.cpp - the CacheSim talk's second example: a getter whose cache
// misses come mostly from one caller.
//
// SceneObject::GetPosition() is a one-line accessor; a flat profile shows it
// missing the cache and says nothing about why. The reverse tree does: AI
// visits every object in a shuffled order each frame (a miss per call), the
// culling pass looks at the objects near the camera, which are few and were
// just visited. `coldcache report --callers GetPosition` names UpdateAI as
// responsible for most of the getter's misses (the talk: 12,000 of 14,000).
//
// Run: coldcache record --cache examples/caches/talk-scaled.toml \
//        --function frame -- ./getposition
//      coldcache report coldcache.ccdump --callers GetPosition
#include <cstdint>
#include <cstdio>

struct Vec3 {
    float x, y, z;
};

class SceneObject {
public:
    __attribute__((noinline)) Vec3 GetPosition() const { return m_Position; }
    void Init(unsigned i)
    {
        m_Position = Vec3{float(i), float(i % 17), 0.0f};
        m_Id = i;
    }

private:
    unsigned char m_Transform[128]; // matrices, bounds, names: not read here
    unsigned m_Id;
    Vec3 m_Position; // in a line of its own relative to the loops below
    unsigned char m_Tail[112];
};

static_assert(sizeof(SceneObject) == 256, "four cache lines per object");

constexpr unsigned kObjects = 2048;
constexpr unsigned kNearCamera = 384;
static SceneObject g_objects[kObjects];
static unsigned g_order[kObjects];

__attribute__((noinline)) float UpdateAI(const SceneObject *objs, const unsigned *order, unsigned n)
{
    float acc = 0.0f;
    for (unsigned i = 0; i < n; i++)
        acc += objs[order[i]].GetPosition().x;
    return acc;
}

__attribute__((noinline)) unsigned CullForRendering(const SceneObject *objs, unsigned n)
{
    unsigned visible = 0;
    for (unsigned i = 0; i < n; i++)
        visible += objs[i].GetPosition().y < 8.0f;
    return visible;
}

extern "C" __attribute__((noinline)) float frame()
{
    float a = UpdateAI(g_objects, g_order, kObjects);
    unsigned v = CullForRendering(g_objects, kNearCamera);
    return a + float(v);
}

int main()
{
    for (unsigned i = 0; i < kObjects; i++) {
        g_objects[i].Init(i);
        g_order[i] = i;
    }
    // A fixed shuffle (xorshift), so every run visits the same order.
    uint32_t s = 2463534242u;
    for (unsigned i = kObjects - 1; i > 0; i--) {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        unsigned j = s % (i + 1);
        unsigned t = g_order[i];
        g_order[i] = g_order[j];
        g_order[j] = t;
    }
    float r = frame();
    std::printf("frame result %.1f\n", double(r));
    return 0;
}
