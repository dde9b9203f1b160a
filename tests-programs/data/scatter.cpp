// The seed talk's second finding, reproduced: 12,000 heap-scattered scene
// objects, one matrix row (12 bytes) read from each: "12,000 lines
// fetched, 12 bytes used of each 64".
//
// Each object is 128 bytes, allocated on its own 64-byte boundary, and
// visited in a shuffled order through a 64-byte aligned pointer array.
// The row `world.m[12..14]` lies at +96..+107, inside the object's second
// line; nothing else of that line is touched in the window. So with a
// cold cache `scene` fetches 12,000 object lines into the first data
// level, each once (its three loads follow one another), each with 12
// bytes used; and the pointer array's 1,500 lines, each with its 64 bytes
// used (eight pointers a line, read in order).
//
// Usage: scatter   (the capture's window: --function scene)
#include <cstdio>
#include <cstdlib>
#include <new>

struct Matrix4 {
    float m[16];
};

struct alignas(64) SceneObject {
    char name[48];  // +0
    Matrix4 world;  // +48: row 3 (m[12..14]) at +96..+107, line 1
    int mesh;       // +112
};
static_assert(sizeof(SceneObject) == 128, "two cache lines");

const int kObjects = 12000;

__attribute__((noinline)) float scene(SceneObject *const *objs, int n) {
    float s = 0;
    for (int i = 0; i < n; ++i) {
        const SceneObject *o = objs[i];
        s += o->world.m[12] + o->world.m[13] + o->world.m[14];
    }
    return s;
}

int main() {
    void *mem = nullptr;
    if (posix_memalign(&mem, 64, sizeof(SceneObject *) * kObjects) != 0) {
        return 1;
    }
    SceneObject **objs = static_cast<SceneObject **>(mem);
    for (int i = 0; i < kObjects; ++i) {
        void *p = nullptr;
        if (posix_memalign(&p, 64, sizeof(SceneObject)) != 0) {
            return 1;
        }
        objs[i] = new (p) SceneObject();
        objs[i]->world.m[12] = float(i);
        objs[i]->mesh = i;
    }
    // Scattered: a fixed shuffle of the visiting order.
    unsigned x = 12345;
    for (int i = kObjects - 1; i > 0; --i) {
        x = x * 1103515245u + 12345u;
        int j = int((x >> 8) % unsigned(i + 1));
        SceneObject *t = objs[i];
        objs[i] = objs[j];
        objs[j] = t;
    }
    std::printf("%.1f\n", scene(objs, kObjects));
    return 0;
}
