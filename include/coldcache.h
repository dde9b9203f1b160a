/* coldcache.h: the C and C++ interface of libcoldcache.so. Link with
 * -lcoldcache (built by `cargo build --release --workspace`:
 * target/release/libcoldcache.so), or let `coldcache record` /
 * `coldcache zones record` preload it.
 *
 * Captures (docs/capture.md): switch cache tracing on for chosen threads of
 * this process, then off, and get a dump.
 *
 *     struct coldcache_options o;
 *     coldcache_options_init(&o);
 *     o.cache = "jaguar";           // preset name or "host"
 *     o.output = "frame.ccdump";
 *     if (coldcache_start(&o) != 0) fprintf(stderr, "%s\n", coldcache_last_error());
 *     do_the_frame();
 *     coldcache_stop();
 *
 * Under `coldcache record`, the options a program leaves unset come from the
 * command line. C++: `coldcache::Capture capture(&o);` stops at scope end.
 *
 * Zones and the spike detector (docs/zones.md):
 *
 *   COLDCACHE_ZONE("name");           zone until the end of the scope
 *                                     (C++: an object; C: gcc/clang cleanup)
 *   COLDCACHE_ZONE_BYTES("name", n);  a zone that processes n bytes
 *   COLDCACHE_ZONE_MSG(fmt, ...);     message formatted only if the
 *                                     innermost zone is over its threshold
 *   coldcache_frame_mark();           end of a frame
 *
 * Define COLDCACHE_DISABLE to compile every zone macro to nothing. */
#ifndef COLDCACHE_H
#define COLDCACHE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Captures ---------------------------------------------------------- */

/* Trace only the thread that calls coldcache_start. */
#define COLDCACHE_THREADS_CALLER 0
/* Trace every thread, including threads created during the capture. */
#define COLDCACHE_THREADS_ALL 1

struct coldcache_options {
    uint32_t size;             /* sizeof(struct coldcache_options); set by coldcache_options_init */
    int32_t threads;           /* COLDCACHE_THREADS_CALLER or COLDCACHE_THREADS_ALL */
    const char *cache;         /* preset name or "host" (sysfs); NULL: default (jaguar, or coldcache record's --cache).
                                  A TOML file is refused (coldcache_last_error names it): the library reads no
                                  configuration files; run the program under `coldcache record --cache FILE`
                                  and leave cache NULL. */
    const char *output;        /* dump path; NULL: default (coldcache.ccdump, or record's -o) */
    const uint32_t *tids;      /* explicit thread ids to trace, or NULL */
    size_t tid_count;          /* entries in tids */
    uint64_t max_instructions; /* stop after this many instructions; 0: no limit */
    const char *trace;         /* also write every access to this cctrace file; NULL: none */
    const char *mode;          /* "auto" (the default: fast where this process allows it, else
                                  trap, with a note in the dump saying why), "trap" (single-step),
                                  "fast" (binary translation) or "verify" (fast, every translated
                                  instruction checked against the trap model: for tests);
                                  NULL: the default ($COLDCACHE_MODE, or coldcache record's
                                  --mode, else "auto") */
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

/* Message of the last failed capture call, or NULL. */
const char *coldcache_last_error(void);

/* ---- Zones and spikes --------------------------------------------------- */

/* One per call site, static; the library fills in id on first use. */
typedef struct coldcache_label {
    const char *name;
    size_t name_len;
    const char *file;
    size_t file_len;
    uint32_t line;
    uint32_t id;
} coldcache_label;

void coldcache_zone_begin(coldcache_label *label);
void coldcache_zone_end(coldcache_label *label);
void coldcache_zone_bytes(uint64_t bytes);
void coldcache_frame_mark(void);
void coldcache_set_enabled(int on);
void coldcache_set_thread_name(const char *name);
int coldcache_write(const char *path); /* 0 or -1 */
uint64_t coldcache_dropped_events(void);

void coldcache_spike_set_global_threshold_ms(double ms); /* < 0: off */
void coldcache_spike_set_zone_threshold_ms(double ms);
void coldcache_spike_set_children_threshold_ms(double ms);
void coldcache_spike_set_all_parents_threshold_ms(double ms);
void coldcache_spike_pause(void);
void coldcache_spike_unpause(void);
void coldcache_spike_ignore_zone(int cond);
void coldcache_spike_ignore_children(int cond);
void coldcache_spike_set_thread_active(int active);
int coldcache_spike_over_threshold(void);
void coldcache_zone_message(const char *msg);
void coldcache_zone_describe(const char *desc);

#ifdef __cplusplus
}
#endif

#define COLDCACHE_CAT2(a, b) a##b
#define COLDCACHE_CAT(a, b) COLDCACHE_CAT2(a, b)
#define COLDCACHE_LABEL_INIT(name) \
    { name, sizeof(name) - 1, __FILE__, sizeof(__FILE__) - 1, __LINE__, 0 }

#if defined(COLDCACHE_DISABLE)
#define COLDCACHE_ZONE(name)
#define COLDCACHE_ZONE_BYTES(name, n)
#define COLDCACHE_ZONE_BEGIN(var, name)
#define COLDCACHE_ZONE_END(var)
#define COLDCACHE_ZONE_MSG(...)
#elif defined(__cplusplus)
namespace coldcache {
/* Begins a zone on construction, ends it on destruction. */
class ScopedZone {
  public:
    __attribute__((no_instrument_function)) explicit ScopedZone(coldcache_label *l)
        : label_(l) {
        coldcache_zone_begin(l);
    }
    __attribute__((no_instrument_function)) ~ScopedZone() { coldcache_zone_end(label_); }
    ScopedZone(const ScopedZone &) = delete;
    ScopedZone &operator=(const ScopedZone &) = delete;

  private:
    coldcache_label *label_;
};
} // namespace coldcache
#define COLDCACHE_ZONE(name)                                                             \
    static coldcache_label COLDCACHE_CAT(coldcache_label_, __LINE__) =                   \
        COLDCACHE_LABEL_INIT(name);                                                      \
    coldcache::ScopedZone COLDCACHE_CAT(coldcache_zone_, __LINE__)(                      \
        &COLDCACHE_CAT(coldcache_label_, __LINE__))
#define COLDCACHE_ZONE_BYTES(name, n) \
    COLDCACHE_ZONE(name);             \
    coldcache_zone_bytes((uint64_t)(n))
#else
/* C: scoped with the gcc/clang cleanup attribute. */
__attribute__((no_instrument_function)) static inline void
coldcache_zone_cleanup_(coldcache_label **l) { coldcache_zone_end(*l); }
#define COLDCACHE_ZONE(name)                                                             \
    static coldcache_label COLDCACHE_CAT(coldcache_label_, __LINE__) =                   \
        COLDCACHE_LABEL_INIT(name);                                                      \
    coldcache_label *COLDCACHE_CAT(coldcache_zone_, __LINE__)                            \
        __attribute__((cleanup(coldcache_zone_cleanup_))) =                              \
            (coldcache_zone_begin(&COLDCACHE_CAT(coldcache_label_, __LINE__)),           \
             &COLDCACHE_CAT(coldcache_label_, __LINE__))
#define COLDCACHE_ZONE_BYTES(name, n) \
    COLDCACHE_ZONE(name);             \
    coldcache_zone_bytes((uint64_t)(n))
#endif

#if !defined(COLDCACHE_DISABLE)
/* Explicit begin/end for C without the cleanup attribute. */
#define COLDCACHE_ZONE_BEGIN(var, name)                          \
    static coldcache_label var = COLDCACHE_LABEL_INIT(name);     \
    coldcache_zone_begin(&var)
#define COLDCACHE_ZONE_END(var) coldcache_zone_end(&var)
/* Formats (snprintf, 512 bytes) only when the innermost zone is over. */
#define COLDCACHE_ZONE_MSG(...)                                  \
    do {                                                         \
        if (coldcache_spike_over_threshold()) {                  \
            char coldcache_msg_[512];                            \
            snprintf(coldcache_msg_, sizeof coldcache_msg_, __VA_ARGS__); \
            coldcache_zone_message(coldcache_msg_);              \
        }                                                        \
    } while (0)
#endif


#ifdef __cplusplus
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
