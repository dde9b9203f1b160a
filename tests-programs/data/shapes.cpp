// The shapes a data view must name, one kernel each, every access count
// known from the source (the loops are pointer chases or have branches, so
// no compiler merges their loads): `run` calls each kernel once.
//
//   scene      12,000 heap objects reached through a pointer array, one
//              matrix row (12 bytes) read from each (the talk's
//              GetPosition): SceneObject::world.m, 3 reads per object
//   table      a global table indexed by a byte: kTable, 1 read per byte
//   stack      a local array of structs in the frame: Particle::mass
//   nested     Node::world.rot.w through a pointer
//   derived    a base-class member through a derived-class pointer
//   tagged     a union member: Tagged::v.d
//   bits       a bit-field (the load of its storage unit)
//   items      std::vector<Item> in a range-for: Item::weight
//
// Usage: shapes   (the capture's window: --function run)
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

struct Matrix4 {
    float m[16];
};

struct SceneObject {
    char name[40];
    Matrix4 world;      // +40
    SceneObject *next;  // +104
    int mesh;           // +112
};

const int kObjects = 12000;

__attribute__((noinline)) float scene(SceneObject **objs, int n) {
    float s = 0;
    for (int i = 0; i < n; ++i) {
        const SceneObject *o = objs[i];
        if (o->mesh >= 0) {
            s += o->world.m[12] + o->world.m[13] + o->world.m[14];
        }
    }
    return s;
}

static const uint32_t kTable[256] = {1, 2, 3, 5, 8, 13, 21, 34};

__attribute__((noinline)) uint32_t table(const uint8_t *bytes, int n) {
    uint32_t h = 0;
    for (int i = 0; i < n; ++i) {
        h = (h >> 3) ^ kTable[bytes[i] ^ (h & 0xff)];
    }
    return h;
}

struct Particle {
    float pos[3];
    float mass;
};

__attribute__((noinline)) float stack(int n) {
    Particle buf[64];
    for (int i = 0; i < 64; ++i) {
        buf[i].mass = float(i % n);
        buf[i].pos[0] = float(i);
    }
    float s = 0;
    for (int i = 0; i < 64; ++i) {
        if (buf[i].pos[0] > 1) {
            s += buf[i].mass;
        }
    }
    return s;
}

struct Quat {
    float x, y, z, w;
};
struct Transform {
    float pos[3];
    Quat rot;     // +12
    float scale;  // +28
};
struct Node {
    int id;
    Transform local;  // +4
    Transform world;  // +36
    Node *next;       // +72
};

__attribute__((noinline)) float nested(const Node *n) {
    float s = 0;
    for (; n; n = n->next) {
        s += n->world.rot.w;
    }
    return s;
}

struct Base {
    int hp;
    int armour;
    virtual ~Base() {}
};
struct Derived : Base {
    float speed;
    Derived *next;
};

__attribute__((noinline)) int derived(const Derived *d) {
    int s = 0;
    for (; d; d = d->next) {
        s += d->armour;
    }
    return s;
}

union Value {
    int64_t i;
    double d;
    char s[8];
};
struct Tagged {
    int tag;
    Value v;  // +8
    Tagged *next;
};

__attribute__((noinline)) double tagged(const Tagged *t) {
    double s = 0;
    for (; t; t = t->next) {
        if (t->tag == 1) {
            s += t->v.d;
        }
    }
    return s;
}

struct Bits {
    unsigned kind : 3;
    unsigned level : 5;
    unsigned count : 12;
    Bits *next;
};

__attribute__((noinline)) unsigned bits(const Bits *b) {
    unsigned s = 0;
    for (; b; b = b->next) {
        s += b->level;
    }
    return s;
}

struct Item {
    int64_t id;
    double weight;
    double price;
};

__attribute__((noinline)) double items(const std::vector<Item> &v) {
    double s = 0;
    for (const Item &it : v) {
        if (it.id >= 0) {
            s += it.weight;
        }
    }
    return s;
}

template <class T> T *chain(int n) {
    T *head = nullptr;
    for (int i = 0; i < n; ++i) {
        T *t = new T();
        t->next = head;
        head = t;
    }
    return head;
}

struct World {
    SceneObject **objs;
    std::vector<uint8_t> bytes;
    Node *nodes;
    Derived *ds;
    Tagged *ts;
    Bits *bs;
    std::vector<Item> its;
};

__attribute__((noinline)) double run(World &w) {
    double s = scene(w.objs, kObjects);
    s += table(w.bytes.data(), int(w.bytes.size()));
    s += stack(7);
    s += nested(w.nodes);
    s += derived(w.ds);
    s += tagged(w.ts);
    s += bits(w.bs);
    s += items(w.its);
    return s;
}

int main() {
    World w;
    w.objs = new SceneObject *[kObjects];
    std::vector<void *> gaps;
    for (int i = 0; i < kObjects; ++i) {
        w.objs[i] = new SceneObject();
        w.objs[i]->world.m[12] = 1;
        gaps.push_back(std::malloc(200));  // scatter the objects
    }
    w.bytes.assign(1000, 7);
    w.nodes = chain<Node>(100);
    w.ds = chain<Derived>(100);
    w.ts = chain<Tagged>(100);
    for (Tagged *t = w.ts; t; t = t->next) {
        t->tag = 1;
        t->v.d = 0.5;
    }
    w.bs = chain<Bits>(100);
    w.its.assign(500, Item{1, 2.0, 3.0});
    std::printf("%.1f\n", run(w));
    return 0;
}
