//! Objects (issue 32): `record --objects`, each data access attributed to
//! the heap block (by allocation site) or mapping it touched, against
//! figures counted by hand from `tests-programs/data/objects.cpp` (its
//! header gives each case's arithmetic), in trap and fast mode. Fast mode
//! must equal trap mode object for object (both run without address-space
//! randomisation, so the addresses and the cache's sets are the same),
//! the objects must add up to the code views' data accesses, and
//! observing the allocator must change nothing counted: the dump's
//! records equal a capture without `--objects`, and its instruction count
//! Callgrind's.

#[path = "common/callgrind_totals.rs"]
mod callgrind_totals;
#[path = "common/dumps.rs"]
mod dumps;
#[path = "common/library.rs"]
mod library;
#[path = "common/programs.rs"]
mod programs;
use callgrind_totals::callgrind_totals;
use coldcache_dump::{Dump, Objects};
use dumps::{load, text};
use library::{have, library, COLDCACHE};
use programs::{compile, gcc_and_setarch_or_skip, run_with_deadline, scratch_in};

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The talk's count of scene objects (`TALK`), captured in fast mode; trap mode
/// (single-stepping: minutes for the 4.6 million instructions of the
/// 12,000 on a loaded machine) and its comparison with fast mode take
/// `SMALL`.
const TALK: u64 = 12_000;
const SMALL: u64 = 1_200;

fn build(dir: &Path) -> PathBuf {
    compile(
        "tests-programs/data/objects.cpp",
        &dir.join("objects"),
        &["-g", "-O1", "-Wl,-z,relro,-z,now"],
        false,
    )
}

/// `record [--objects] --mode MODE --function FUNCTION -o DUMP -- objects
/// CASE [N]` under `setarch -R`; the program's output.
fn record(
    dir: &Path,
    bin: &Path,
    mode: &str,
    objects: bool,
    function: &str,
    case: &[&str],
    dump: &str,
) -> String {
    let mut c = Command::new("setarch");
    c.current_dir(dir)
        .env("COLDCACHE_LIB", library())
        // Every library bound at load: no lazy binding in a window (the
        // dynamic linker's resolver differs under Valgrind).
        .env("LD_BIND_NOW", "1")
        .args(["-R", COLDCACHE, "record", "--no-progress", "--mode", mode])
        .args(objects.then_some("--objects"))
        .args(["--function", function, "-o", dump, "--"])
        .arg(bin)
        .args(case);
    let out = run_with_deadline(c, dump);
    assert!(out.status.success(), "record {dump}: {}", text(&out.stderr));
    text(&out.stdout)
}

fn objects_json(dir: &Path, dump: &str) -> Value {
    let out = Command::new(COLDCACHE)
        .current_dir(dir)
        .args(["report", dump, "--view", "data", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "report {dump}: {}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["objects"].clone()
}

/// The allocation sites whose innermost frame is at `objects.cpp:LINE`.
fn site(o: &Value, line: u32) -> &Value {
    let at = format!("(objects.cpp:{line})");
    let found: Vec<&Value> = o["sites"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["frames"][0].as_str().unwrap_or("").ends_with(&at))
        .collect();
    assert_eq!(found.len(), 1, "one site at {at}: {o:#}");
    found[0]
}

fn n(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v:#}"))
}

/// The line of `objects.cpp` holding `needle` (1-based).
fn line_of(needle: &str) -> u32 {
    let src =
        std::fs::read_to_string(library::repo().join("tests-programs/data/objects.cpp")).unwrap();
    let i = src
        .lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle} in objects.cpp"));
    i as u32 + 1
}

/// The other object rows of kind `kind`.
fn others<'a>(o: &'a Value, kind: &str) -> Vec<&'a Value> {
    o["others"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == kind)
        .collect()
}

/// The row of the program's global `name` (`name (objects)`).
fn global<'a>(o: &'a Value, name: &str) -> &'a Value {
    let label = format!("{name} (objects)");
    let found: Vec<&Value> = others(o, "global")
        .into_iter()
        .filter(|r| r["label"] == label.as_str())
        .collect();
    assert_eq!(found.len(), 1, "one global {label}: {o:#}");
    found[0]
}

/// The row of the frames of the function named `name` (`, outside its
/// locals` when some of them are rows of their own).
fn frame<'a>(o: &'a Value, name: &str) -> &'a Value {
    let label = format!("frames of {name}");
    let rest = format!("{label}, outside its locals");
    let found: Vec<&Value> = others(o, "stack frame")
        .into_iter()
        .filter(|r| r["label"] == label.as_str() || r["label"] == rest.as_str())
        .collect();
    assert_eq!(found.len(), 1, "one row {label}: {o:#}");
    found[0]
}

/// The reads of a row's field named `field`, when it has one.
fn field_reads(row: &Value, field: &str) -> Option<u64> {
    row["fields"]
        .as_array()?
        .iter()
        .find(|f| f["field"] == field)
        .map(|f| n(f, "reads"))
}

/// The row of the local variable `var` of the function `name`.
fn local<'a>(o: &'a Value, var: &str, name: &str) -> &'a Value {
    let label = format!("{var} in {name}");
    let found: Vec<&Value> = others(o, "local")
        .into_iter()
        .filter(|r| r["label"] == label.as_str())
        .collect();
    assert_eq!(found.len(), 1, "one local {label}: {o:#}");
    found[0]
}

/// The program's data mappings with accesses outside its globals.
fn program_data(o: &Value) -> Vec<&Value> {
    others(o, "module data")
        .into_iter()
        .filter(|r| r["label"].as_str().unwrap().starts_with("objects "))
        .collect()
}

/// Data accesses of the dump's records (the code views' `Dr + Dw`).
fn data_accesses(d: &Dump) -> u64 {
    let t = callgrind_totals(d);
    t[1] + t[2]
}

fn objects_of(d: &Dump) -> &Objects {
    d.objects.as_ref().expect("an OBJS section")
}

/// Every case in both modes: the hand-computed figures, fast = trap
/// object for object, the objects summing to the code views' data
/// accesses.
#[test]
fn objects_match_the_hand_computed_figures_in_both_modes() {
    if !gcc_and_setarch_or_skip("objects_match_the_hand_computed_figures_in_both_modes") {
        return;
    }
    let dir = scratch_in("data-objects", "cases");
    let bin = build(&dir);
    let small = SMALL.to_string();
    let cases = [
        ("getposition", "getposition"),
        ("global", "global"),
        ("globals", "globals"),
        ("stack", "stack"),
        ("frames", "frames"),
        ("realloc", "grow"),
        ("reuse", "reuse"),
        ("memalign", "aligned"),
        ("new", "with_new"),
        ("scene", "scene"),
        ("mapped", "mapped"),
        ("premapped", "visit"),
        ("threadframes", "frames"),
        ("earlier", "scene_visit"),
    ];
    for (case, function) in cases {
        let mut dumps = Vec::new();
        // getposition: N in fast mode (the talk's figures), then SMALL in
        // both modes for their comparison.
        let runs: &[(&str, u64)] = if case == "earlier" {
            &[("trap", SMALL), ("fast", SMALL)]
        } else if case == "getposition" || case == "scene" {
            &[("fast", TALK), ("trap", SMALL), ("fast", SMALL)]
        } else {
            &[("trap", 0), ("fast", 0)]
        };
        for &(mode, count) in runs {
            let dump = format!("{case}-{mode}-{count}.ccdump");
            let args: Vec<&str> = match count {
                TALK | 0 => vec![case],
                _ => vec![case, &small],
            };
            let out = record(&dir, &bin, mode, true, function, &args, &dump);
            if case == "reuse" {
                assert_eq!(out.trim(), "same address: 1", "glibc reused the block");
            }
            let d = load(&dir.join(&dump));
            let o = objects_json(&dir, &dump);
            // Nothing lost: every data access of the records is in one
            // object row.
            assert_eq!(n(&o, "accesses"), data_accesses(&d), "{case} {mode}: {o:#}");
            let sum: u64 = o["sites"]
                .as_array()
                .unwrap()
                .iter()
                .chain(o["others"].as_array().unwrap())
                .map(|r| n(r, "accesses"))
                .sum();
            assert_eq!(sum, n(&o, "accesses"), "{case} {mode}");
            assert_eq!(n(&o, "unreturned"), 0, "{case} {mode}");
            assert_eq!(n(&o, "untracked"), 0, "{case} {mode}");
            check(case, mode, if count == 0 { TALK } else { count }, &o);
            dumps.push(d);
        }
        let k = dumps.len();
        assert_eq!(
            objects_of(&dumps[k - 2]),
            objects_of(&dumps[k - 1]),
            "{case}: fast mode's objects differ from trap mode's"
        );
    }
}

/// The hand-computed figures of `case` (getposition with `objects`
/// objects, `N` in the header's arithmetic).
#[allow(non_snake_case)]
fn check(case: &str, mode: &str, objects: u64, o: &Value) {
    let N = objects;
    let what = format!("{case} {mode}: {o:#}");
    match case {
        "getposition" => {
            // The objects: N blocks of 128 bytes, one read each, each a
            // first-level miss.
            let obj = site(o, line_of("ptrs[i] = static_cast<Obj *>(malloc"));
            assert_eq!(n(obj, "blocks"), N, "{what}");
            assert_eq!(n(obj, "bytes"), 128 * N, "{what}");
            assert_eq!(n(obj, "freed"), N, "{what}");
            assert_eq!(n(obj, "accesses"), N, "{what}");
            assert_eq!(n(obj, "reads"), N, "{what}");
            assert_eq!(obj["misses"][0].as_u64(), Some(N), "{what}");
            assert_eq!(
                obj["label"].as_str().unwrap().split(' ').next(),
                Some("malloc")
            );
            // The pointer array, its own site: filled, read, read to free.
            let arr = site(o, line_of("Obj *volatile *ptrs"));
            assert_eq!(n(arr, "blocks"), 1, "{what}");
            assert_eq!(n(arr, "bytes"), 8 * N, "{what}");
            assert_eq!(n(arr, "writes"), N, "{what}");
            assert_eq!(n(arr, "reads"), 2 * N, "{what}");
            assert_eq!(n(o, "allocations"), N + 1, "{what}");
            assert_eq!(n(o, "frees"), N + 1, "{what}");
            assert_eq!(n(o, "live"), 0, "{what}");
            // The eviction buffer: 1,024 lines of a global, each a miss.
            // `evict` starts in the last file-backed page of `.data` and
            // goes on in the anonymous rest of `.bss`: one global, two
            // mappings.
            let evict = global(o, "evict");
            assert_eq!(
                (
                    n(evict, "reads"),
                    n(evict, "writes"),
                    evict["misses"][0].as_u64()
                ),
                (1024, 0, Some(1024)),
                "{what}"
            );
            assert_eq!(n(evict, "bytes"), 64 * 1024, "{what}");
            assert!(program_data(o).is_empty(), "{what}");
        }
        "global" => {
            assert_eq!(o["sites"].as_array().unwrap().len(), 0, "{what}");
            let t = global(o, "table");
            assert_eq!((n(t, "reads"), n(t, "writes")), (1000, 0), "{what}");
            assert_eq!(n(t, "bytes"), 4000, "{what}");
            // The global's accesses by the type the resolver gave them.
            assert_eq!(n(t, "typed_accesses"), 1000, "{what}");
            let f = &t["fields"][0];
            assert_eq!(f["field"], "table (int)", "{what}");
            assert_eq!((n(f, "reads"), n(f, "writes")), (1000, 0), "{what}");
            // The mapping that holds it keeps none of them.
            assert!(program_data(o).is_empty(), "{what}");
        }
        "globals" => {
            // Reached through a pointer (no instruction names them): by
            // address. Static and function-local names demangled.
            let miss = |r: &Value| r["misses"][0].as_u64().unwrap();
            let hot = global(o, "hot");
            assert_eq!(
                (
                    n(hot, "reads"),
                    n(hot, "writes"),
                    miss(hot),
                    n(hot, "bytes")
                ),
                (256, 0, 16, 1024),
                "{what}"
            );
            let cold = global(o, "cold");
            assert_eq!(
                (
                    n(cold, "reads"),
                    n(cold, "writes"),
                    miss(cold),
                    n(cold, "bytes")
                ),
                (1024, 0, 32, 2048),
                "{what}"
            );
            let calls = global(o, "globals()::calls");
            assert_eq!(
                (n(calls, "reads"), n(calls, "writes"), miss(calls)),
                (1, 1, 1),
                "{what}"
            );
            assert!(program_data(o).is_empty(), "{what}");
            assert_eq!(others(o, "global").len(), 3, "{what}");
        }
        "stack" => {
            // Nothing but the frame of `stack()` is touched: its local
            // array `a`, 256 writes and 256 reads (1 KiB: 16 lines, each
            // missed once by its first write), and the `ret`'s read of
            // the return address, the frame's own.
            let a = local(o, "a", "stack()");
            assert_eq!((n(a, "writes"), n(a, "reads")), (256, 256), "{what}");
            assert_eq!(a["type"], "int", "{what}");
            let f = frame(o, "stack()");
            assert_eq!((n(f, "writes"), n(f, "reads")), (0, 1), "{what}");
            assert_eq!(field_reads(f, "[return address]"), Some(1), "{what}");
            assert_eq!(
                n(a, "accesses") + n(f, "accesses"),
                n(o, "accesses"),
                "{what}"
            );
            assert!(others(o, "stack").is_empty(), "{what}");
        }
        "frames" | "threadframes" => {
            // The frame holding the address, not the function running:
            // `fill`'s 64 writes through its pointer go to the local `a`
            // of `frames()` (read at the call `frames()` is making), with
            // `frames()`'s 64 reads; the rest of its frame: the call's
            // push of `fill`'s return address and its `ret`. `fill`'s own
            // frame: its `ret`'s read.
            let a = local(o, "a", "frames()");
            assert_eq!((n(a, "writes"), n(a, "reads")), (64, 64), "{what}");
            let f = frame(o, "frames()");
            assert_eq!((n(f, "writes"), n(f, "reads")), (1, 1), "{what}");
            // By word: the `ret`'s read of the return address, the call's
            // push of `fill`'s.
            assert_eq!(field_reads(f, "[return address]"), Some(1), "{what}");
            let pushed = f["fields"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["field"] == "[return address of a call]")
                .map(|x| n(x, "writes"));
            assert_eq!(pushed, Some(1), "{what}");
            let g = frame(o, "fill(int volatile*, int)");
            assert_eq!((n(g, "writes"), n(g, "reads")), (0, 1), "{what}");
            assert!(others(o, "stack").is_empty(), "{what}");
        }
        "realloc" => {
            let m = site(o, line_of("malloc(100 * sizeof(int))"));
            assert_eq!((n(m, "blocks"), n(m, "bytes")), (1, 400), "{what}");
            assert_eq!(
                (n(m, "writes"), n(m, "reads"), n(m, "freed")),
                (100, 0, 1),
                "{what}"
            );
            let r = site(o, line_of("realloc((void *)p"));
            assert_eq!((n(r, "blocks"), n(r, "bytes")), (1, 4000), "{what}");
            // 1,000 writes, and `p[0] == 0`.
            assert_eq!(
                (n(r, "writes"), n(r, "reads"), n(r, "freed")),
                (1000, 1, 1),
                "{what}"
            );
            assert_eq!(
                r["label"].as_str().unwrap().split(' ').next(),
                Some("realloc")
            );
            assert_eq!(n(o, "live"), 0, "{what}");
        }
        "mapped" => {
            // The mapping the program makes, resized by mremap and
            // unmapped in two halves: one row of its mmap call.
            let m = site(o, line_of("// the mapping's site"));
            assert_eq!(
                (m["kind"].as_str(), m["allocator"].as_str()),
                (Some("mapping"), Some("mmap")),
                "{what}"
            );
            assert_eq!(
                (n(m, "blocks"), n(m, "bytes"), n(m, "freed")),
                (1, 131_072, 1),
                "{what}"
            );
            assert_eq!(
                (n(m, "accesses"), n(m, "writes"), n(m, "reads")),
                (4096, 1024, 3072),
                "{what}"
            );
            // The large block is the block's; its header is in the
            // mapping malloc made.
            let b = site(o, line_of("// the large block's site"));
            assert_eq!(
                (n(b, "blocks"), n(b, "bytes"), n(b, "freed")),
                (1, 1 << 20, 1),
                "{what}"
            );
            assert_eq!((n(b, "writes"), n(b, "reads")), (16, 0), "{what}");
            let inner: Vec<&Value> = o["sites"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|s| {
                    s["label"]
                        .as_str()
                        .unwrap()
                        .starts_with("mmap by malloc in mapped()")
                })
                .collect();
            assert_eq!(inner.len(), 1, "{what}");
            assert!(n(inner[0], "bytes") > 1 << 20, "{what}");
            assert!(n(inner[0], "accesses") > 0, "{what}");
            assert_eq!(n(inner[0], "freed"), 1, "{what}");
            assert_eq!(
                (n(o, "in_blocks"), n(o, "in_mappings")),
                (16, 4096 + n(inner[0], "accesses")),
                "{what}"
            );
            assert!(others(o, "unmapped").is_empty(), "{what}");
        }
        "premapped" => {
            let before: Vec<&Value> = others(o, "anonymous")
                .into_iter()
                .filter(|r| {
                    r["label"].as_str().unwrap().starts_with(
                        "anonymous, mapped after the capture's start and before the window",
                    )
                })
                .collect();
            assert_eq!(before.len(), 1, "{what}");
            assert_eq!(
                (n(before[0], "reads"), n(before[0], "writes")),
                (1024, 0),
                "{what}"
            );
            assert!(others(o, "unmapped").is_empty(), "{what}");
        }
        "reuse" => {
            // One address, two sites: the accesses before the free and
            // after the second malloc are told apart.
            let a = site(o, line_of("volatile int *a = "));
            let b = site(o, line_of("volatile int *b = "));
            assert_eq!(
                (n(a, "blocks"), n(a, "writes"), n(a, "reads")),
                (1, 10, 0),
                "{what}"
            );
            assert_eq!(
                (n(b, "blocks"), n(b, "writes"), n(b, "reads")),
                (1, 20, 0),
                "{what}"
            );
            assert_eq!((n(o, "frees"), n(o, "unknown_frees")), (2, 0), "{what}");
        }
        "memalign" => {
            // Fifty blocks given through one out slot: each its own block
            // (fast mode used to read the slot when the buffer was
            // replayed, after the loop had reused it: one block, replaced
            // fifty times, and 49 unknown frees).
            let m = site(o, line_of("posix_memalign(&slot"));
            assert_eq!((n(m, "blocks"), n(m, "bytes")), (50, 50 * 256), "{what}");
            assert_eq!(
                (n(m, "writes"), n(m, "reads"), n(m, "freed")),
                (200, 0, 50),
                "{what}"
            );
            assert_eq!(
                m["label"].as_str().unwrap().split(' ').next(),
                Some("posix_memalign")
            );
            assert_eq!(
                (n(o, "frees"), n(o, "unknown_frees"), n(o, "live")),
                (50, 0, 0),
                "{what}"
            );
        }
        "new" => {
            let v = site(o, line_of("V *v = new V"));
            assert_eq!(v["label"].as_str().unwrap().split(' ').next(), Some("new"));
            assert_eq!((n(v, "blocks"), n(v, "bytes")), (1, 32), "{what}");
            assert_eq!(
                (n(v, "writes"), n(v, "reads"), n(v, "freed")),
                (8, 8, 1),
                "{what}"
            );
            // `operator new` calls malloc, `delete` free: counted once.
            assert_eq!((n(o, "allocations"), n(o, "frees")), (1, 1), "{what}");
        }
        "scene" => {
            // The site of `new Scene`: its type and each field's accesses
            // by hand (the header's arithmetic), every access typed.
            let s = site(o, line_of("Scene *o = new Scene"));
            assert_eq!((n(s, "blocks"), n(s, "bytes")), (N, 128 * N), "{what}");
            assert_eq!((n(s, "reads"), n(s, "writes")), (3 * N, N), "{what}");
            assert_eq!(s["type"], "Scene", "{what}");
            assert_eq!(n(s, "typed_accesses"), 4 * N, "{what}");
            let fields: Vec<(String, u64, u64, u64)> = s["fields"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| {
                    (
                        f["field"].as_str().unwrap().to_string(),
                        n(f, "reads"),
                        n(f, "writes"),
                        f["misses"][0].as_u64().unwrap(),
                    )
                })
                .collect();
            assert_eq!(
                fields,
                [
                    ("Scene::pos.x".to_string(), N, 0, N),
                    ("Scene::id".to_string(), 0, N, N / 4),
                    ("Scene::pos.y".to_string(), N, 0, 0),
                    ("Scene::pos.z".to_string(), N, 0, 0),
                ],
                "{what}"
            );
            // The pointer array (`new Scene *[n]`): filled in scene_make
            // and read in scene_visit through `objs` (typed `Scene*`),
            // read again to delete (`scene`'s loop, which g++ -O1 leaves
            // untyped: no variable holds the array in that register).
            let a = site(o, line_of("Scene **objs = new Scene *[n]"));
            assert_eq!((n(a, "reads"), n(a, "writes")), (2 * N, N), "{what}");
            assert_eq!(a["type"], "Scene*", "{what}");
            let f = &a["fields"][0];
            assert_eq!(f["field"], "*objs (Scene*)", "{what}");
            assert_eq!((n(f, "reads"), n(f, "writes")), (N, N), "{what}");
            assert!(n(a, "typed_accesses") >= 2 * N, "{what}");
        }
        "earlier" => {
            // No allocation seen: the blocks were made before the window,
            // in the brk heap, and typed by the instructions that read them.
            assert_eq!(o["sites"].as_array().unwrap().len(), 0, "{what}");
            let heap = others(o, "heap, allocated earlier");
            assert_eq!(heap.len(), 1, "{what}");
            let h = heap[0];
            assert_eq!((n(h, "reads"), n(h, "writes")), (4 * N, 0), "{what}");
            assert_eq!(n(h, "typed_accesses"), 4 * N, "{what}");
            assert_eq!(h["type"], "Scene", "{what}");
            let mut fields: Vec<(String, u64)> = h["fields"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| (f["field"].as_str().unwrap().to_string(), n(f, "reads")))
                .collect();
            fields.sort();
            assert_eq!(
                fields,
                [
                    ("*objs (Scene*)".to_string(), N),
                    ("Scene::pos.x".to_string(), N),
                    ("Scene::pos.y".to_string(), N),
                    ("Scene::pos.z".to_string(), N),
                ],
                "{what}"
            );
        }
        _ => unreachable!(),
    }
}

/// Observing the allocator changes nothing counted: with and without
/// `--objects` the records are equal, in both modes (trap mode on `SMALL`
/// objects), and the instruction count of windows that allocate,
/// reallocate and free is Callgrind's.
#[test]
fn observing_the_allocator_changes_no_count() {
    if !gcc_and_setarch_or_skip("observing_the_allocator_changes_no_count") {
        return;
    }
    let dir = scratch_in("data-objects", "counts");
    let bin = build(&dir);
    let mut ir = Vec::new();
    let small = SMALL.to_string();
    for (mode, args) in [
        ("fast", vec!["getposition"]),
        ("trap", vec!["getposition", &small]),
        ("fast", vec!["getposition", &small]),
    ] {
        // Names of one length: the environment, and so the stack's
        // addresses and their cache sets, the same in both runs.
        let with = format!("on-{mode}-{}.ccdump", args.len());
        let without = format!("no-{mode}-{}.ccdump", args.len());
        record(&dir, &bin, mode, true, "getposition", &args, &with);
        record(&dir, &bin, mode, false, "getposition", &args, &without);
        let (a, b) = (load(&dir.join(&with)), load(&dir.join(&without)));
        assert!(a.objects.is_some() && b.objects.is_none());
        assert_eq!(a.records, b.records, "{mode}: --objects changed the counts");
        assert_eq!(a.meta.instructions, b.meta.instructions);
        ir.push(a.meta.instructions);
        // The view of a dump without objects says so.
        let out = Command::new(COLDCACHE)
            .current_dir(&dir)
            .args(["report", &without, "--view", "data"])
            .output()
            .unwrap();
        assert!(
            text(&out.stdout).contains("this dump has no object data"),
            "{}",
            text(&out.stdout)
        );
    }
    assert_eq!(ir[1], ir[2], "trap and fast mode");
    // The whole of a program whose first allocation makes its heap (the
    // talk's scatter.cpp, `--all` from `main`): the library's own start
    // allocates the same with and without --objects (it looks the
    // allocator up either way), so that first allocation takes the same
    // path and the counts agree.
    let scatter = compile(
        "tests-programs/data/scatter.cpp",
        &dir.join("scatter"),
        &["-g", "-O2"],
        false,
    );
    let mut all = Vec::new();
    for (flag, dump) in [
        ("--objects", "on-all.ccdump"),
        ("--schedule=os", "no-all.ccdump"),
    ] {
        let mut c = Command::new("setarch");
        c.current_dir(&dir)
            .env("COLDCACHE_LIB", library())
            .args([
                "-R",
                COLDCACHE,
                "record",
                "--no-progress",
                "--mode",
                "fast",
                "--all",
            ])
            .args([flag, "-o", dump, "--"])
            .arg(&scatter);
        let out = run_with_deadline(c, dump);
        assert!(out.status.success(), "record {dump}: {}", text(&out.stderr));
        all.push(load(&dir.join(dump)));
    }
    assert_eq!(all[0].meta.instructions, all[1].meta.instructions);
    assert!(
        all[0].records == all[1].records,
        "record --all: --objects changed the counts"
    );
    if !have("valgrind") {
        eprintln!(
            "SKIP the Callgrind half of observing_the_allocator_changes_no_count: valgrind missing"
        );
        return;
    }
    // Windows that allocate, reallocate and free, from the heap made
    // before them: coldcache's instruction count with --objects against
    // Callgrind's.
    for (case, function) in [("realloc", "grow"), ("reuse", "reuse"), ("new", "with_new")] {
        let dump = format!("cg-{case}.ccdump");
        record(&dir, &bin, "fast", true, function, &[case], &dump);
        let ours = load(&dir.join(&dump)).meta.instructions;
        let out_file = dir.join(format!("callgrind.{case}.out"));
        let mut c = Command::new("setarch");
        c.env("LD_BIND_NOW", "1")
            .args(["-R", "valgrind", "--tool=callgrind"])
            .arg(format!("--callgrind-out-file={}", out_file.display()))
            .arg(format!("--toggle-collect={function}*"))
            .arg(&bin)
            .arg(case);
        let out = run_with_deadline(c, "callgrind");
        assert!(out.status.success(), "callgrind: {}", text(&out.stderr));
        let theirs: u64 = std::fs::read_to_string(&out_file)
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("summary: "))
            .and_then(|v| v.trim().parse().ok())
            .expect("callgrind summary line");
        assert_eq!(
            ours, theirs,
            "{case}: coldcache --objects against Callgrind"
        );
    }
}

/// Translations kept across two captures of one process (a thread of the
/// first still blocked in `read` from translated code) are made anew when
/// object tracking is switched on for the second
/// (`tests-programs/data/kept.c`, whose header gives the arithmetic): its
/// `malloc` site must have its 50 blocks of 6,225 bytes. Before, the kept
/// blocks of `malloc` recorded no size register: 49 blocks, of an absurd
/// size.
#[test]
fn translations_kept_across_captures_follow_the_allocator_set() {
    if !gcc_and_setarch_or_skip("translations_kept_across_captures_follow_the_allocator_set") {
        return;
    }
    let dir = scratch_in("data-objects", "kept");
    let bin = compile(
        "tests-programs/data/kept.c",
        &dir.join("kept"),
        &["-g", "-O1"],
        true,
    );
    let mut c = Command::new(&bin);
    c.current_dir(&dir).args(["one.ccdump", "two.ccdump"]);
    let out = run_with_deadline(c, "kept");
    assert!(out.status.success(), "kept: {}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "51225 6225\n");
    let o = objects_json(&dir, "two.ccdump");
    let sites = o["sites"].as_array().unwrap();
    assert_eq!(sites.len(), 1, "{o:#}");
    assert!(
        sites[0]["frames"][0]
            .as_str()
            .unwrap()
            .starts_with("churn (kept.c:"),
        "{o:#}"
    );
    assert_eq!(
        (n(&sites[0], "blocks"), n(&sites[0], "bytes")),
        (50, 6225),
        "{o:#}"
    );
    assert_eq!((n(&o, "allocations"), n(&o, "frees")), (50, 50), "{o:#}");
}

/// CPython's object allocator is observed (`PyObject_Malloc`, `_Calloc`,
/// `_Realloc`, `_Free`): `tests-programs/data/pyalloc.c` exports the four
/// over a pool of its own, as libpython does over pymalloc's arenas (which
/// `malloc` never sees: on a real interpreter, a JSON round trip had 3.5%
/// of its data accesses in blocks seen allocated before, 22.7% after).
/// The program's header gives the figures; fast mode equals trap mode.
#[test]
fn cpythons_object_allocator_is_observed_like_malloc() {
    if !gcc_and_setarch_or_skip("cpythons_object_allocator_is_observed_like_malloc") {
        return;
    }
    let dir = scratch_in("data-objects", "pyalloc");
    let bin = compile(
        "tests-programs/data/pyalloc.c",
        &dir.join("pyalloc"),
        &["-g", "-O1", "-rdynamic"],
        false,
    );
    let mut dumps = Vec::new();
    for mode in ["trap", "fast"] {
        let dump = format!("pyalloc-{mode}.ccdump");
        let out = record(&dir, &bin, mode, true, "work", &[], &dump);
        assert_eq!(out.trim(), "0", "{mode}");
        let o = objects_json(&dir, &dump);
        assert_eq!(n(&o, "allocations"), 102, "{mode}: {o:#}");
        assert_eq!(
            n(&o, "frees"),
            102,
            "{mode}: 101 frees and a realloc's move"
        );
        assert_eq!(n(&o, "live"), 0, "{mode}");
        let sites = o["sites"].as_array().unwrap();
        let by = |allocator: &str| -> &Value {
            let found: Vec<&Value> = sites
                .iter()
                .filter(|s| s["allocator"] == allocator)
                .collect();
            assert_eq!(found.len(), 1, "{mode}: one {allocator} site: {o:#}");
            found[0]
        };
        // (allocator, innermost function, blocks, bytes, reads, writes)
        let expected = [
            ("PyObject_Malloc", "make ", 100, 4_800, 6, 600),
            ("PyObject_Realloc", "work ", 1, 96, 0, 12),
            ("PyObject_Calloc", "work ", 1, 64, 8, 0),
        ];
        for (allocator, function, blocks, bytes, reads, writes) in expected {
            let s = by(allocator);
            assert!(
                s["frames"][0].as_str().unwrap().starts_with(function),
                "{mode} {allocator}: {s:#}"
            );
            assert_eq!(n(s, "blocks"), blocks, "{mode} {allocator}");
            assert_eq!(n(s, "freed"), blocks, "{mode} {allocator}");
            assert_eq!(n(s, "bytes"), bytes, "{mode} {allocator}");
            assert_eq!(n(s, "reads"), reads, "{mode} {allocator}");
            assert_eq!(n(s, "writes"), writes, "{mode} {allocator}");
        }
        dumps.push(load(&dir.join(&dump)));
    }
    assert_eq!(
        objects_of(&dumps[0]),
        objects_of(&dumps[1]),
        "fast mode's objects differ from trap mode's"
    );
}

/// An allocator of the program's own (`record --allocator NAME=KIND`):
/// `tests-programs/data/pool.c`'s pool in `.bss`, its functions static
/// (found in the symbol table, as `--function` finds them), the pool
/// first and the size or block second (`size2`, `free2`). The header's
/// figures, in both modes, and fast mode equal to trap mode. Before the
/// region memo gave way to blocks in a module's data, 162 of the 192 reads
/// went to the pool's `.bss`. A kind or a name that is wrong is refused
/// before the run.
#[test]
fn an_allocator_of_the_programs_own_is_observed_by_name() {
    if !gcc_and_setarch_or_skip("an_allocator_of_the_programs_own_is_observed_by_name") {
        return;
    }
    let dir = scratch_in("data-objects", "pool");
    let bin = compile(
        "tests-programs/data/pool.c",
        &dir.join("pool"),
        &["-g", "-O1"],
        false,
    );
    let mut dumps = Vec::new();
    for mode in ["trap", "fast"] {
        let dump = format!("pool-{mode}.ccdump");
        let mut c = Command::new("setarch");
        c.current_dir(&dir)
            .env("COLDCACHE_LIB", library())
            .args(["-R", COLDCACHE, "record", "--no-progress", "--mode", mode])
            .args(["--allocator", "pool_alloc=size2"])
            .args(["--allocator", "pool_free=free2"])
            .args(["--function", "work", "-o", &dump, "--"])
            .arg(&bin);
        let out = run_with_deadline(c, &dump);
        assert!(out.status.success(), "{mode}: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout).trim(), "2016", "{mode}");
        let o = objects_json(&dir, &dump);
        assert_eq!(n(&o, "allocations"), 64, "{mode}: {o:#}");
        assert_eq!(n(&o, "frees"), 64, "{mode}");
        assert_eq!(n(&o, "unknown_frees"), 0, "{mode}");
        let sites = o["sites"].as_array().unwrap();
        assert_eq!(sites.len(), 1, "{mode}: {o:#}");
        let s = &sites[0];
        assert_eq!(s["allocator"], "pool_alloc", "{mode}");
        assert!(
            s["frames"][0].as_str().unwrap().starts_with("spawn "),
            "{mode}: {s:#}"
        );
        assert_eq!(n(s, "blocks"), 64, "{mode}");
        assert_eq!(n(s, "bytes"), 2_560, "{mode}");
        assert_eq!(n(s, "freed"), 64, "{mode}");
        assert_eq!(n(s, "reads"), 192, "{mode}");
        assert_eq!(n(s, "writes"), 320, "{mode}");
        dumps.push(load(&dir.join(&dump)));
    }
    assert_eq!(
        objects_of(&dumps[0]),
        objects_of(&dumps[1]),
        "fast mode's objects differ from trap mode's"
    );
    for (spec, says) in [
        ("pool_alloc=bogus", "unknown kind \"bogus\""),
        ("pool_alloc", "expected NAME=KIND"),
        ("no_such_pool=free", "no function of that name"),
    ] {
        let out = Command::new(COLDCACHE)
            .current_dir(&dir)
            .args(["record", "--allocator", spec, "-o", "refused.ccdump", "--"])
            .arg(&bin)
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{spec}: {err}");
        assert!(out.stdout.is_empty(), "{spec}: the program ran");
    }
}

/// A dump without the sites' accesses per instruction (section `OBJI`,
/// as every dump of version 6 and older) reports its objects as before:
/// the same rows and figures, no site nor mapping typed, and the view
/// says why.
#[test]
fn a_dump_without_per_instruction_objects_reports_as_before() {
    if !gcc_and_setarch_or_skip("a_dump_without_per_instruction_objects_reports_as_before") {
        return;
    }
    let dir = scratch_in("data-objects", "older");
    let bin = build(&dir);
    let small = SMALL.to_string();
    record(
        &dir,
        &bin,
        "fast",
        true,
        "scene",
        &["scene", &small],
        "new.ccdump",
    );
    let mut d = load(&dir.join("new.ccdump"));
    // Locals split the frames of both alike when kept (not compared here:
    // the frames' rows are, whole).
    if let Some(f) = d.objects.as_mut().unwrap().frames.as_mut() {
        f.slots.clear();
    }
    std::fs::write(dir.join("new.ccdump"), d.to_bytes()).unwrap();
    assert!(d.objects.as_ref().unwrap().by_instruction.is_some());
    d.objects.as_mut().unwrap().by_instruction = None;
    // The globals' own rows per instruction too (an older dump has no
    // globals at all; their rows are compared here, untyped).
    if let Some(g) = d.objects.as_mut().unwrap().globals.as_mut() {
        g.by_instruction.clear();
    }
    std::fs::write(dir.join("old.ccdump"), d.to_bytes()).unwrap();
    let (new, old) = (
        objects_json(&dir, "new.ccdump"),
        objects_json(&dir, "old.ccdump"),
    );
    let strip = |o: &Value| -> Value {
        let mut o = o.clone();
        let rows = o["sites"].as_array().unwrap().len();
        let mut all: Vec<Value> = o["sites"].as_array().unwrap().clone();
        all.extend(o["others"].as_array().unwrap().iter().cloned());
        for s in &mut all {
            s["type"] = Value::from("");
            s["typed_accesses"] = Value::from(0);
            s["fields"] = Value::Array(Vec::new());
        }
        o["others"] = Value::Array(all.split_off(rows));
        o["sites"] = Value::Array(all);
        o["types_note"] = Value::from("");
        o
    };
    assert_eq!(strip(&new), strip(&old));
    assert_eq!(site(&new, line_of("Scene *o = new Scene"))["type"], "Scene");
    for s in old["sites"]
        .as_array()
        .unwrap()
        .iter()
        .chain(old["others"].as_array().unwrap())
    {
        assert_eq!((s["type"].as_str(), n(s, "typed_accesses")), (Some(""), 0));
    }
    let out = Command::new(COLDCACHE)
        .current_dir(&dir)
        .args(["report", "old.ccdump", "--view", "data"])
        .output()
        .unwrap();
    assert!(
        text(&out.stdout).contains("no per-instruction object data"),
        "{}",
        text(&out.stdout)
    );
}

/// A library loaded in the window (`objects.cpp`'s `late` case, `late.c`):
/// its data was mapped by the dynamic linker, whose `mmap` is its own, so
/// no object the capture knew held it when read; at the capture's end it
/// is named by what holds it then. By hand: the global `late_table` 256
/// reads and 16 misses of the last level (1 KiB on a line boundary, first
/// touched in the window: the dynamic linker's clearing of the `.bss`
/// tail writes it before it is read, as many writes as its `memset`
/// makes), and as many of the first level or a few more (what the
/// dynamic linker touches between that clearing and `late_sum` may evict
/// a line of it from the 8-way first level: 17, seen in trap mode on an
/// AMD EPYC with one build's layout of the preloaded library);
/// `late_calls` 1 read and its write; nothing left unmapped. Both modes,
/// equal object for object.
#[test]
fn a_library_loaded_in_the_window_has_its_globals_named() {
    if !gcc_and_setarch_or_skip("a_library_loaded_in_the_window_has_its_globals_named") {
        return;
    }
    let dir = scratch_in("data-objects", "late");
    let bin = build(&dir);
    compile(
        "tests-programs/data/late.c",
        &dir.join("liblate.so"),
        &["-g", "-O1", "-shared", "-fPIC"],
        false,
    );
    let mut dumps = Vec::new();
    for mode in ["trap", "fast"] {
        let dump = format!("late-{mode}.ccdump");
        let out = record(
            &dir,
            &bin,
            mode,
            true,
            "late",
            &["late", "./liblate.so"],
            &dump,
        );
        assert_eq!(out.trim(), "0", "{mode}");
        let o = objects_json(&dir, &dump);
        let what = format!("late, {mode}: {o:#}");
        let global = |label: &str| -> Value {
            let found: Vec<&Value> = others(&o, "global")
                .into_iter()
                .filter(|r| r["label"] == label)
                .collect();
            assert_eq!(found.len(), 1, "one global {label}: {what}");
            found[0].clone()
        };
        let t = global("late_table (liblate.so)");
        assert_eq!(n(&t, "reads"), 256, "{what}");
        let misses = |level: usize| t["misses"][level].as_u64().expect("misses");
        assert_eq!(misses(1), 16, "{what}");
        assert!((16..=20).contains(&misses(0)), "{what}");
        let c = global("late_calls (liblate.so)");
        assert_eq!(n(&c, "reads"), 1, "{what}");
        assert!(n(&c, "writes") >= 1, "{what}");
        assert!(others(&o, "unmapped").is_empty(), "{what}");
        // The objects still sum to the code views' data accesses.
        let d = load(&dir.join(&dump));
        assert_eq!(n(&o, "accesses"), data_accesses(&d), "{what}");
        dumps.push(d);
    }
    assert_eq!(
        objects_of(&dumps[0]),
        objects_of(&dumps[1]),
        "late: fast mode's objects differ from trap mode's"
    );
}

/// Line use of a local (`objects.cpp`'s `stack` case with `--line-use`):
/// the 512 accesses of `a in stack()` are by instructions that touch
/// nothing else, in the innermost frame (a slot's pc is the accessing
/// instruction), so all are covered: its 1 KiB fetches 16 lines, or 17
/// when the array does not start a line, and uses its 1,024 bytes of them
/// (more only by the frame's other words sharing its end lines).
#[test]
fn a_local_arrays_line_use_is_its_own() {
    if !gcc_and_setarch_or_skip("a_local_arrays_line_use_is_its_own") {
        return;
    }
    let dir = scratch_in("data-objects", "local-line-use");
    let bin = build(&dir);
    let mut c = Command::new("setarch");
    c.current_dir(&dir)
        .env("COLDCACHE_LIB", library())
        .env("LD_BIND_NOW", "1")
        .args(["-R", COLDCACHE, "record", "--no-progress", "--objects"])
        .args(["--line-use", "--function", "stack", "-o", "lu.ccdump", "--"])
        .arg(&bin)
        .arg("stack");
    let out = run_with_deadline(c, "lu.ccdump");
    assert!(out.status.success(), "record: {}", text(&out.stderr));
    let o = objects_json(&dir, "lu.ccdump");
    assert_eq!(o["line_use"], true, "{o:#}");
    let a = local(&o, "a", "stack()");
    assert_eq!(n(a, "line_use_accesses"), 512, "{o:#}");
    let lines = n(a, "lines_fetched");
    assert!(lines == 16 || lines == 17, "{lines} lines: {o:#}");
    let used = n(a, "bytes_used");
    assert!((1024..=lines * 64).contains(&used), "{used} bytes: {o:#}");
}
