// Resolver test program (crates/cli/tests/resolve.rs): C++ functions with
// namespaces, classes, templates, overloads and an operator, so their
// demangled names can be compared with c++filt's. `record --function
// run` captures it (run is extern "C", so --function finds it by name).
#include <vector>

namespace geo {
struct Vec2 {
    double x, y;
    Vec2 operator+(const Vec2 &o) const;
    double dot(const Vec2 &o) const;
};

__attribute__((noinline)) Vec2 Vec2::operator+(const Vec2 &o) const
{
    return Vec2{x + o.x, y + o.y};
}

__attribute__((noinline)) double Vec2::dot(const Vec2 &o) const
{
    return x * o.x + y * o.y;
}

template <typename T>
__attribute__((noinline)) T total(const std::vector<T> &v)
{
    T s{};
    for (const T &e : v)
        s = s + e;
    return s;
}

namespace {
__attribute__((noinline)) int scale(int a, int b) { return a * b + 1; }
__attribute__((noinline)) int scale(long a) { return (int)a * 3; }
} // namespace
} // namespace geo

extern "C" __attribute__((noinline)) double run(int n)
{
    std::vector<geo::Vec2> v;
    std::vector<int> w;
    for (int i = 0; i < n; i++) {
        v.push_back(geo::Vec2{double(i), double(n - i)});
        w.push_back(geo::scale(i, n) + geo::scale(long(i)));
    }
    geo::Vec2 t = geo::total(v);
    return t.dot(t) + geo::total(w);
}

int main(int argc, char **)
{
    return run(8 + argc) < 0 ? 1 : 0;
}
