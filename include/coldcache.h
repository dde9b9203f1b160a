/* coldcache.h: the C and C++ interface of libcoldcache.so.
 *
 * Captures: switch cache tracing on for chosen threads of this process,
 * then off, and get a dump that `coldcache report` reads.
 *
 *     struct coldcache_options o;
 *     coldcache_options_init(&o);
 *     o.cache = "jaguar";           // preset name or TOML file
 *     o.output = "frame.ccdump";
 *     if (coldcache_start(&o) != 0) fprintf(stderr, "%s\n", coldcache_last_error());
 *     do_the_frame();
 *     coldcache_stop();
 *
 * Link with -lcoldcache (the library is built by `cargo build --release`,
 * target/release/libcoldcache.so). Under `coldcache record`, the options a
 * program leaves unset come from the command line.
 */
#ifndef COLDCACHE_H
#define COLDCACHE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Trace only the thread that calls coldcache_start. */
#define COLDCACHE_THREADS_CALLER 0
/* Trace every thread, including threads created during the capture. */
#define COLDCACHE_THREADS_ALL 1

struct coldcache_options {
    uint32_t size;             /* sizeof(struct coldcache_options); set by coldcache_options_init */
    int32_t threads;           /* COLDCACHE_THREADS_CALLER or COLDCACHE_THREADS_ALL */
    const char *cache;         /* preset name or TOML file; NULL: default (jaguar, or coldcache record's --cache) */
    const char *output;        /* dump path; NULL: default (coldcache.ccdump, or record's -o) */
    const uint32_t *tids;      /* explicit thread ids to trace, or NULL */
    size_t tid_count;          /* entries in tids */
    uint64_t max_instructions; /* stop after this many instructions; 0: no limit */
    const char *trace;         /* also write every access to this cctrace file; NULL: none */
};

/* Fills *options with the defaults. */
void coldcache_options_init(struct coldcache_options *options);

/* Starts a capture (options may be NULL for the defaults). Tracing of the
 * calling thread begins at the instruction after this call. Returns 0, or
 * -1 with the reason in coldcache_last_error(). */
int coldcache_start(const struct coldcache_options *options);

/* Stops the capture and writes its dump. Returns 0, or -1. */
int coldcache_stop(void);

/* Maps a thread (kernel tid, gettid()) to a simulated core for later captures. */
int coldcache_set_thread_core(uint32_t tid, uint32_t core);

/* Message of the last failed call, or NULL. */
const char *coldcache_last_error(void);

#ifdef __cplusplus
}

namespace coldcache {
/* Scoped capture: starts in the constructor, stops in the destructor. */
class Capture {
public:
    explicit Capture(const coldcache_options *options = nullptr) : ok_(coldcache_start(options) == 0) {}
    ~Capture() { if (ok_) coldcache_stop(); }
    bool ok() const { return ok_; }
    Capture(const Capture &) = delete;
    Capture &operator=(const Capture &) = delete;
private:
    bool ok_;
};
}  // namespace coldcache
#endif

#endif /* COLDCACHE_H */
