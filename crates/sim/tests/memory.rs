//! Hierarchies too big for the memory available are refused with a
//! `ConfigError` giving the figure, not aborted on: this test binary's
//! allocator refuses any single allocation over 1 GiB, as `ulimit -v`
//! would.

use coldcache_sim::*;
use std::alloc::{GlobalAlloc, Layout, System};

struct Limited;

const LIMIT: usize = 1 << 30;

// SAFETY: every call is passed to the system allocator unchanged, except
// requests over `LIMIT`, which fail with a null pointer as the
// `GlobalAlloc` contract allows.
unsafe impl GlobalAlloc for Limited {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if l.size() > LIMIT {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` came from `System` with this layout.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if n > LIMIT {
            return std::ptr::null_mut();
        }
        // SAFETY: `p` came from `System` with layout `l`.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static ALLOC: Limited = Limited;

fn one_level(size: u64) -> HierarchyConfig {
    HierarchyConfig {
        cores: 1,
        coherence: false,
        levels: vec![LevelConfig {
            name: "L1".into(),
            level: 1,
            kind: CacheKind::Unified,
            size,
            line_size: 64,
            assoc: 8,
            policy: ReplacementPolicy::Lru,
            write: WritePolicy::WriteBack,
            inclusion: Inclusion::NonInclusive,
            sharing: Sharing::Core,
            latency: None,
        }],
        ..HierarchyConfig::default()
    }
}

#[test]
fn hierarchy_too_big_for_memory_is_refused_with_the_figure() {
    // 2^29 lines of 64 bytes, 8 ways: per line an 8-byte tag, a flag byte
    // and an 8-byte prefetch site (a data first level); per set an 8-byte
    // recency list. 2^29 * 17 + 2^26 * 8 bytes.
    // Too big for the lean engine (2^24 lines at most): no tags of its own.
    let cfg = one_level(64 << 29);
    assert!(!cfg.lean_shape());
    let want: u64 = (1 << 29) * 17 + (1 << 26) * 8;
    assert_eq!(want, 9_663_676_416);
    assert_eq!(cfg.state_bytes(), want);
    let e = Hierarchy::new(&cfg).err().expect("refused");
    assert_eq!(e.key, "levels[0]");
    assert!(
        e.to_string().contains("needs 9663676416 bytes, 9.0 GiB"),
        "{e}"
    );
}

#[test]
fn state_bytes_of_the_cachegrind_preset_by_hand() {
    // I1: 512 lines * (8 + 1) + 64 sets * 8; D1: 512 * (8 + 1 + 8) + 64 * 8;
    // LL: 131072 * 9 + 8192 * 8. The preset runs on the lean engine,
    // whose tags (8 bytes a line) sit beside those: (512 + 512 + 131072) * 8.
    let want = 5120 + 9216 + 1_245_184 + 1_056_768;
    assert!(presets::cachegrind_default().lean_shape());
    assert_eq!(presets::cachegrind_default().state_bytes(), want);
    // Within the limit: built.
    assert!(Hierarchy::new(&presets::cachegrind_default()).is_ok());
}

#[test]
fn state_bytes_of_the_jaguar_engine_by_hand() {
    // The engine's own state beside the general caches': per line an
    // 8-byte tag, and for the data first levels an 8-byte mask of bytes
    // touched. I1: 8 cores * 512 lines * 8; D1: 8 * 512 * 16; L2: 2
    // modules * 32768 lines * 8. The same configuration with straddles
    // counted once is not of the engine's shape and needs the rest only.
    let jag = presets::jaguar();
    let mut other = jag.clone();
    other.straddle = StraddleMode::Whole;
    assert!(jag.jaguar_shape() && !other.jaguar_shape() && !other.lean_shape());
    let want = 8 * 512 * 8 + 8 * 512 * 16 + 2 * 32768 * 8;
    assert_eq!(want, 622_592);
    assert_eq!(jag.state_bytes() - other.state_bytes(), want);
    let h = Hierarchy::new(&jag).unwrap();
    assert!(h.uses_jaguar_engine());
}
