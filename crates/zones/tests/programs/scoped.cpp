// The C++ form of COLDCACHE_ZONE (a scoped object) and the spike API,
// linked directly against libcoldcache.so. Writes its recording with
// coldcache_write(argv[1]).
#include "coldcache.h"
#include <chrono>
#include <thread>

static void inner() {
    COLDCACHE_ZONE("inner");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    COLDCACHE_ZONE_MSG("inner slept %d ms", 2);
}

int main(int argc, char **argv) {
    coldcache_spike_set_global_threshold_ms(1.0);
    {
        COLDCACHE_ZONE("outer");
        coldcache_spike_set_zone_threshold_ms(1000.0);
        inner();
        inner();
    }
    coldcache_frame_mark();
    return argc > 1 ? -coldcache_write(argv[1]) : 1;
}
