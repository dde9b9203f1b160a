// A C++ program with threads, built without frame pointers by the tests
// (crates/cli/tests/attach.rs): four std::threads run Sim::frame through
// two calls of their own (run -> tick -> frame) a fixed number of times
// (argv[1], default 400) with short sleeps between. Every call of frame
// does the same work, so one call counts the same whichever is captured;
// the output depends only on the number of frames.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace sim {
struct Sim {
    std::vector<double> x = std::vector<double>(512, 1.0);
    __attribute__((noinline)) double frame(int f) {
        double s = 0;
        for (std::size_t i = 0; i < x.size(); i++) {
            x[i] = x[i] * 0.5 + double((i + f) & 7);
            s += x[i];
        }
        return s;
    }
};
}  // namespace sim

static std::mutex out;

__attribute__((noinline)) static double tick(sim::Sim &s, int f) { return s.frame(f) + 1; }

__attribute__((noinline)) static void run(int id, int frames) {
    sim::Sim s;
    double total = 0;
    for (int f = 0; f < frames; f++) {
        total += tick(s, f);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::lock_guard<std::mutex> g(out);
    std::printf("thread %d: %.3f\n", id, total);
}

int main(int argc, char **argv) {
    int frames = argc > 1 ? std::atoi(argv[1]) : 400;
    std::printf("ready\n");
    std::fflush(stdout);
    std::vector<std::thread> t;
    for (int i = 0; i < 4; i++) t.emplace_back(run, i, frames);
    for (auto &th : t) th.join();
    return 0;
}
