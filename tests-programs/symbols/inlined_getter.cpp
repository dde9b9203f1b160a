// Inlined-frames test program (crates/cli/tests/analysis.rs): the issue 36
// case. An in-class getter is inlined into BroadPhase (g++ -O2) and called
// out of line, through a member pointer, by Cull. Built -O2 -g,
// `record --function frame` captures it; `report --callers GetPosition`
// must show both callers.
//
// Hand count (an empty cache at the window's start; each object is four
// lines, the getter reads m_Position.x and m_Scale, one line): BroadPhase
// reads objects [0, 1664), Cull objects [1664, 2048), so the getter misses
// D1 1,664 times inlined in BroadPhase and 384 times called by Cull; Cull
// calls it 384 times.
#include <cstdio>

struct Vec3 {
    float x, y, z;
};

class SceneObject {
public:
    float GetPosition() const { return m_Position.x * m_Scale; }
    void Init(unsigned i)
    {
        m_Position = Vec3{float(i), float(i % 17), 0.0f};
        m_Scale = 1.0f;
    }

private:
    unsigned char m_Transform[128];
    Vec3 m_Position;
    float m_Scale;
    unsigned char m_Tail[112];
};

static_assert(sizeof(SceneObject) == 256, "four cache lines per object");

constexpr unsigned kObjects = 2048;
constexpr unsigned kNear = 384;
static SceneObject g_objects[kObjects];
using Getter = float (SceneObject::*)() const;
static Getter volatile g_getter = &SceneObject::GetPosition;

__attribute__((noinline)) float BroadPhase(const SceneObject *objs, unsigned n)
{
    float acc = 0.0f;
    for (unsigned i = 0; i < n; i++)
        acc += objs[i].GetPosition();
    return acc;
}

__attribute__((noinline)) float Cull(const SceneObject *objs, unsigned n)
{
    Getter get = g_getter;
    float acc = 0.0f;
    for (unsigned i = 0; i < n; i++)
        acc += (objs[i].*get)();
    return acc;
}

extern "C" __attribute__((noinline)) float frame()
{
    return BroadPhase(g_objects, kObjects - kNear) + Cull(g_objects + kObjects - kNear, kNear);
}

int main()
{
    for (unsigned i = 0; i < kObjects; i++)
        g_objects[i].Init(i);
    std::printf("frame result %.1f\n", double(frame()));
    return 0;
}
