//! Dump format tests: round trip, and refusal of truncated or corrupted input.

use coldcache_dump::data::NO_TYPE;
use coldcache_dump::symbols::{NO_FILE, NO_MODULE};
use coldcache_dump::{
    CounterLayout, DataType, DataTypes, Dump, DumpError, Frame, Function, Location, Member, Meta,
    Module, ModuleStatus, ModuleSymbols, Record, Side, SourceText, StackNode, Symbols, Thread,
    TypeKind, TypedAccess, TypedSlot, Via,
};

fn sample() -> Dump {
    let levels = vec!["L1".to_string(), "L2".to_string()];
    let names = CounterLayout::new(levels.len()).names(&levels);
    let n = names.len();
    Dump {
        meta: Meta {
            program: vec!["./a.out".into(), "x".into()],
            pid: 42,
            cache_name: "jaguar".into(),
            levels,
            cores: 8,
            threads: "all".into(),
            trigger: "api".into(),
            counters: names,
            instructions: 10,
            ..Meta::default()
        },
        modules: vec![Module {
            path: "/bin/true".into(),
            build_id: vec![1, 2, 3],
            start: 0x5555_0000,
            end: 0x5556_0000,
            file_offset: 0x1000,
        }],
        threads: vec![Thread {
            tid: 42,
            name: "main".into(),
            core: 0,
        }],
        stacks: vec![
            StackNode::default(),
            StackNode {
                parent: 0,
                call_site: 0x5555_1234,
                callee: 0x5555_2000,
            },
        ],
        records: vec![
            Record {
                ip: 0x5555_2000,
                stack: 1,
                thread: 0,
                counters: (0..n as u64).collect(),
            },
            Record {
                ip: 0x5555_1000,
                stack: 0,
                thread: 0,
                counters: vec![u64::MAX; n],
            },
        ],
        symbols: None,
        sources: Vec::new(),
        data: None,
        objects: None,
        timeline: None,
    }
}

/// `sample()` resolved: an inlined frame, a symbol-table-only function, an
/// address with nothing known.
fn sample_v2() -> Dump {
    let mut d = sample();
    d.symbols = Some(Symbols {
        files: vec!["/src/a.c".into(), "/src/a.h".into()],
        functions: vec![
            Function {
                name: "main".into(),
                module: 0,
                entry: 0x5555_1000,
                file: 0,
                line: 10,
            },
            Function {
                name: "inlined_helper".into(),
                module: 0,
                entry: 0,
                file: 1,
                line: 3,
            },
            Function {
                name: "no_lines".into(),
                module: NO_MODULE,
                entry: 0x5555_2000,
                file: NO_FILE,
                line: 0,
            },
        ],
        locations: vec![
            Location {
                addr: 0x5555_1000,
                frames: vec![Frame {
                    function: 0,
                    file: 0,
                    line: 11,
                }],
                code: vec![0x55],
            },
            Location {
                addr: 0x5555_1234,
                frames: vec![
                    Frame {
                        function: 1,
                        file: 1,
                        line: 4,
                    },
                    Frame {
                        function: 0,
                        file: 0,
                        line: 12,
                    },
                ],
                code: vec![0xe8, 1, 2, 3, 4],
            },
            Location {
                addr: 0x5555_2000,
                frames: vec![Frame {
                    function: 2,
                    file: NO_FILE,
                    line: 0,
                }],
                code: vec![],
            },
            Location {
                addr: 0x7777_0000,
                frames: vec![],
                code: vec![],
            },
        ],
        modules: vec![ModuleSymbols {
            status: ModuleStatus::Lines,
            detail: "/usr/lib/debug/x.debug".into(),
        }],
    });
    d
}

#[test]
fn symbols_round_trip_and_lookup() {
    let d = sample_v2();
    let back = Dump::from_bytes(&d.to_bytes()).unwrap();
    assert_eq!(back, d);
    let s = back.symbols.unwrap();
    assert_eq!(s.location(0x5555_1234).unwrap().frames.len(), 2);
    assert!(s.location(0x5555_1235).is_none());
    assert_eq!(d.addresses(), vec![0x5555_1000, 0x5555_1234, 0x5555_2000]);
    assert_eq!(d.module_of(0x5555_1234), Some(0));
    assert_eq!(d.module_of(0x1), None);
}

#[test]
fn every_truncation_and_flipped_bit_of_a_resolved_dump_is_refused() {
    let bytes = sample_v2().to_bytes();
    for len in 0..bytes.len() {
        assert!(Dump::from_bytes(&bytes[..len]).is_err(), "length {len}");
    }
    for i in 0..bytes.len() {
        let mut b = bytes.clone();
        b[i] ^= 0x10;
        assert!(Dump::from_bytes(&b).is_err(), "byte {i} accepted");
    }
}

/// A dump with the line-use counters (issue 32) round-trips, and its
/// layout is the one with line use: the same version, told apart by the
/// counter names; the dump without them keeps the plain layout.
#[test]
fn line_use_counters_round_trip_and_name_their_layout() {
    let mut d = sample();
    let levels = d.meta.levels.clone();
    let l = CounterLayout::with_line_use(levels.len());
    d.meta.counters = l.names(&levels);
    for r in &mut d.records {
        r.counters.extend([3, 40]);
    }
    let back = Dump::from_bytes(&d.to_bytes()).unwrap();
    assert_eq!(back, d);
    assert_eq!(back.layout(), Some(l));
    assert!(l.has_line_use());
    let (f, u) = (l.lines_fetched().unwrap(), l.bytes_used().unwrap());
    assert_eq!(back.meta.counters[f], "l1d_lines_fetched");
    assert_eq!(back.meta.counters[u], "l1d_bytes_used");
    assert_eq!(back.records[0].counters[u], 40);
    assert_eq!(sample().layout(), Some(CounterLayout::new(2)));
}

#[test]
fn round_trip_keeps_everything() {
    let d = sample();
    let back = Dump::from_bytes(&d.to_bytes()).unwrap();
    assert_eq!(back, d);
    // Counter layout: 2 + 3 sides x (2 levels + memory) + 4 = 15 counters.
    assert_eq!(d.meta.counters.len(), 15);
    let l = d.layout().expect("standard layout");
    assert_eq!(l, CounterLayout::new(2));
    assert_eq!(d.meta.counters[l.served(Side::Read, 0)], "r_L1");
    assert_eq!(d.meta.counters[l.prefetch_issued()], "prefetch_issued");
    // The thin wrappers still agree with the layout until their last user
    // moves to it.
    {
        assert_eq!(l.names(&d.meta.levels), d.meta.counters);
    }
}

/// A dump written in parts, its records encoded apart one by one (as a
/// capture writes it: the records' payload is never copied into one
/// buffer), is the file written whole, and reads back as the dump; a
/// sections-only dump with a sample of a resolved one too.
#[test]
fn a_dump_written_in_parts_is_the_whole_file() {
    for d in [sample(), sample_v4()] {
        let mut e = coldcache_dump::EncodedRecords::encoder(d.meta.counters.len(), d.records.len());
        for r in &d.records {
            e.push(r.ip, r.stack, r.thread, &r.counters);
        }
        let records = e.finish();
        let mut bare = d.clone();
        bare.records.clear();
        let parts = bare.to_parts_with_records(&records);
        let mut file = Vec::new();
        for p in parts.parts() {
            file.extend_from_slice(p);
        }
        assert_eq!(file.len(), parts.len());
        assert_eq!(file, d.to_bytes());
        assert_eq!(Dump::from_bytes(&file).unwrap(), d);
        assert_eq!(d.to_parts().concat(), d.to_bytes());
    }
}

/// A dump whose counters are not the standard list for its levels (an older
/// or foreign writer) has no layout; it still loads and keeps its names.
#[test]
fn a_foreign_counter_list_has_no_layout() {
    let mut d = sample();
    d.meta.counters.swap(5, 6);
    let back = Dump::from_bytes(&d.to_bytes()).unwrap();
    assert_eq!(back.layout(), None);
    assert_eq!(back.meta.counters[5], "r_L2");
    let mut d = sample();
    d.meta.levels.push("L3".into());
    assert_eq!(d.layout(), None);
}

#[test]
fn every_truncation_is_refused() {
    let bytes = sample().to_bytes();
    for len in 0..bytes.len() {
        let err = Dump::from_bytes(&bytes[..len]).unwrap_err();
        assert!(
            matches!(
                err,
                DumpError::Truncated(_) | DumpError::BadMagic | DumpError::Checksum { .. }
            ),
            "length {len}: {err}"
        );
    }
}

#[test]
fn every_flipped_bit_is_refused() {
    let bytes = sample().to_bytes();
    for i in 0..bytes.len() {
        for bit in [0, 3, 7] {
            let mut b = bytes.clone();
            b[i] ^= 1 << bit;
            assert!(Dump::from_bytes(&b).is_err(), "byte {i} bit {bit} accepted");
        }
    }
}

#[test]
fn newer_version_is_refused_by_number() {
    let mut b = sample().to_bytes();
    let newer = coldcache_dump::VERSION + 1;
    b[8..12].copy_from_slice(&newer.to_le_bytes());
    match Dump::from_bytes(&b) {
        Err(DumpError::UnsupportedVersion(v)) if v == newer => {}
        other => panic!("{other:?}"),
    }
}

/// Dumps written by each format version, committed: every later coldcache
/// must keep reading them. Versions 1 to 5 were made by these tests'
/// `sample*` functions (`COLDCACHE_WRITE_SAMPLES=1` wrote the newest when
/// it was added); versions 6 and 7 are real captures (below); none is
/// ever rewritten.
#[test]
fn committed_version_1_sample_still_loads() {
    let bytes = committed_sample("v1.ccdump", 1);
    let d = Dump::from_bytes(&bytes).unwrap();
    assert_eq!(d, sample());
    assert_eq!(d.layout(), Some(CounterLayout::new(2)));
}

#[test]
fn committed_version_2_sample_still_loads() {
    let bytes = committed_sample("v2.ccdump", 2);
    let d = Dump::from_bytes(&bytes).unwrap();
    assert_eq!(d, sample_v2());
    assert_eq!(d.layout(), Some(CounterLayout::new(2)));
}

/// Version 3: the version 2 sample with two embedded source files.
fn sample_v3() -> Dump {
    let mut d = sample_v2();
    d.sources = vec![
        SourceText {
            path: "/src/a.c".into(),
            text: "int main(void)\n{\n    return helper();\n}\n".into(),
        },
        SourceText {
            path: "/src/a.h".into(),
            text: "static inline int helper(void) { return 0; } /* ünïcode */\n".into(),
        },
    ];
    d
}

#[test]
fn committed_version_3_sample_still_loads() {
    let bytes = committed_sample("v3.ccdump", 3);
    let d = Dump::from_bytes(&bytes).unwrap();
    assert_eq!(d, sample_v3());
    assert_eq!(d.layout(), Some(CounterLayout::new(2)));
    assert_eq!(d.source("/src/a.h").map(|t| t.lines().count()), Some(1));
    assert_eq!(d.source("/src/b.c"), None);
}

/// Version 4: the version 3 sample with the data types of two
/// instructions: `Entity::flags` through a register variable, and
/// `Entity::pos.y` of a global array's element.
fn sample_v4() -> Dump {
    let mut d = sample_v3();
    let vec3 = DataType {
        name: "Vec3".into(),
        kind: TypeKind::Struct,
        size: 12,
        members: ["x", "y", "z"]
            .iter()
            .enumerate()
            .map(|(i, n)| Member {
                name: (*n).into(),
                offset: 4 * i as u64,
                size: 4,
                type_name: "float".into(),
                ty: NO_TYPE,
                ..Member::default()
            })
            .collect(),
        decl: "/src/a.h:3".into(),
    };
    let entity = DataType {
        name: "Entity".into(),
        kind: TypeKind::Class,
        size: 192,
        members: vec![
            Member {
                name: "pos".into(),
                offset: 0,
                size: 12,
                type_name: "Vec3".into(),
                ty: 0,
                ..Member::default()
            },
            Member {
                name: "flags".into(),
                offset: 160,
                size: 2,
                type_name: "uint16_t".into(),
                ty: NO_TYPE,
                ..Member::default()
            },
            Member {
                name: "dirty".into(),
                offset: 162,
                size: 1,
                bit_offset: 3,
                bit_size: 1,
                type_name: "unsigned int".into(),
                ty: NO_TYPE,
                ..Member::default()
            },
        ],
        decl: "/src/a.h:9".into(),
    };
    d.data = Some(DataTypes {
        types: vec![vec3, entity],
        accesses: vec![
            TypedAccess {
                addr: 0x401000,
                ty: 1,
                offset: 160,
                size: 1,
                path: vec![1],
                straddles: false,
                via: Via::Register,
                variable: "e".into(),
            },
            TypedAccess {
                addr: 0x401004,
                ty: 1,
                offset: 4,
                size: 4,
                path: vec![0, 1],
                straddles: false,
                via: Via::Global,
                variable: "entities".into(),
            },
        ],
        modules: d.modules.iter().map(|_| "2 types".to_string()).collect(),
        slots: Vec::new(),
    });
    d
}

#[test]
fn committed_version_4_sample_still_loads() {
    let bytes = committed_sample("v4.ccdump", 4);
    let d = Dump::from_bytes(&bytes).unwrap();
    assert_eq!(d, sample_v4());
    let data = d.data.as_ref().unwrap();
    let flags = data.access(0x401000).unwrap();
    assert_eq!(data.field_name(flags), "Entity::flags");
    assert_eq!(
        data.field_name(data.access(0x401004).unwrap()),
        "Entity::pos.y"
    );
    assert!(data.access(0x401002).is_none());
}

#[test]
fn data_types_round_trip_and_a_path_to_no_member_is_refused() {
    let d = sample_v4();
    assert_eq!(Dump::from_bytes(&d.to_bytes()).unwrap(), d);
    // Without data types no DATA section is written.
    let mut plain = d.clone();
    plain.data = None;
    assert!(!plain.to_bytes().windows(4).any(|w| w == b"DATA"));
    // A path naming a fourth member of Entity is refused with the section
    // named.
    let mut bad = d.clone();
    bad.data.as_mut().unwrap().accesses[0].path = vec![3];
    let e = Dump::from_bytes(&bad.to_bytes()).unwrap_err().to_string();
    assert!(e.contains("DATA") && e.contains("member 3"), "{e}");
    let mut bad = d.clone();
    bad.data.as_mut().unwrap().types[1].members[0].ty = 7;
    let e = Dump::from_bytes(&bad.to_bytes()).unwrap_err().to_string();
    assert!(e.contains("DATA") && e.contains("type 7"), "{e}");
    // Version 11: the locals of stack slots, found by (pc, below); a
    // slot's type out of range, and slots out of order, are refused.
    let mut slots = d;
    let slot = |pc: u64, below: u64, variable: &str, ty: u32, offset: u64| TypedSlot {
        pc,
        below,
        variable: variable.into(),
        ty,
        offset,
    };
    slots.data.as_mut().unwrap().slots = vec![
        slot(0x401000, 24, "arr", 0, 8),
        slot(0x401000, 200, "e", 1, 40),
        slot(0x401010, 24, "arr", 0, 8),
    ];
    let back = Dump::from_bytes(&slots.to_bytes()).unwrap();
    assert_eq!(back, slots);
    let data = back.data.as_ref().unwrap();
    assert_eq!(
        data.slot(0x401000, 200).map(|s| s.variable.as_str()),
        Some("e")
    );
    assert_eq!(data.slot(0x401000, 25), None);
    let mut bad = slots.clone();
    bad.data.as_mut().unwrap().slots[1].ty = 2;
    let e = Dump::from_bytes(&bad.to_bytes()).unwrap_err().to_string();
    assert!(
        e.contains("LOCL") && e.contains("stack slot 1") && e.contains("type 2"),
        "{e}"
    );
    let mut bad = slots.clone();
    bad.data.as_mut().unwrap().slots.swap(0, 2);
    let e = Dump::from_bytes(&bad.to_bytes()).unwrap_err().to_string();
    assert!(e.contains("LOCL") && e.contains("not after"), "{e}");
    // Without slots no LOCL section; marked version 10, it is not read.
    let mut plain = slots.clone();
    plain.data.as_mut().unwrap().slots.clear();
    assert!(!plain.to_bytes().windows(4).any(|w| w == b"LOCL"));
    let mut v10 = slots.to_bytes_dense();
    v10[8..12].copy_from_slice(&10u32.to_le_bytes());
    checksum_anew(&mut v10);
    assert_eq!(Dump::from_bytes(&v10).unwrap(), plain);
    // A LOCL section without DATA.
    let mut orphan = slots.to_bytes();
    let at = orphan.windows(4).position(|w| w == b"DATA").unwrap();
    orphan[at..at + 4].copy_from_slice(b"XDAT");
    checksum_anew(&mut orphan);
    let e = Dump::from_bytes(&orphan).unwrap_err().to_string();
    assert!(e.contains("LOCL") && e.contains("without DATA"), "{e}");
}

#[test]
fn sources_round_trip_and_bad_sources_are_refused() {
    let d = sample_v3();
    let b = d.to_bytes();
    assert_eq!(Dump::from_bytes(&b).unwrap(), d);
    // Without sources, no SRCS section is written.
    let mut plain = d.clone();
    plain.sources.clear();
    let pb = plain.to_bytes();
    assert!(!pb.windows(4).any(|w| w == b"SRCS"));
    assert_eq!(Dump::from_bytes(&pb).unwrap(), plain);
    // A source text that is not UTF-8 is refused with the section named
    // (the checksum recomputed so the decoder sees it).
    let at = b.windows(3).position(|w| w == "ün".as_bytes()).unwrap();
    let mut bad = b.clone();
    bad[at] = 0xff;
    let n = bad.len();
    let crc = crc32fast::hash(&bad[..n - 12]);
    bad[n - 4..].copy_from_slice(&crc.to_le_bytes());
    let e = Dump::from_bytes(&bad).unwrap_err().to_string();
    assert!(e.contains("SRCS") && e.contains("UTF-8"), "{e}");
}

/// `META.warm` (how the cache was warmed before the window) and
/// `META.schedule` (how threads were interleaved) are optional within
/// version 3: a dump that has them round-trips them; one without (cold,
/// as the OS ran the threads) writes neither key, so its bytes are what
/// this version wrote before the fields existed (the committed samples,
/// which have none, read as cold and unserialised above); a reader that
/// does not know a key skips it, as JSON objects allow.
#[test]
fn meta_warm_schedule_and_calls_round_trip_and_a_default_dump_writes_none_of_them() {
    let cold = sample();
    assert!(cold.meta.warm.is_empty());
    let bytes = cold.to_bytes();
    assert!(!bytes.windows(6).any(|w| w == b"\"warm\""));
    assert!(!bytes.windows(10).any(|w| w == b"\"schedule\""));
    assert!(!bytes.windows(7).any(|w| w == b"\"calls\""));
    assert!(!bytes.windows(10).any(|w| w == b"\"untraced\""));
    assert!(!bytes.windows(17).any(|w| w == b"\"client_requests\""));
    assert!(!bytes.windows(6).any(|w| w == b"\"part\""));
    assert!(!bytes.windows(6).any(|w| w == b"\"mode\""));
    let mut warm = sample();
    warm.meta.warm =
        "by calls 1 to 2 of the function (24586 instructions simulated, not counted)".into();
    warm.meta.schedule = "serial, quantum 10000 instructions".into();
    warm.meta.calls = "3 to 5".into();
    warm.meta.untraced = coldcache_dump::Untraced {
        present: 1,
        started: 4,
    };
    warm.meta.client_requests = coldcache_dump::ClientRequests {
        honoured: true,
        made: vec![("CALLGRIND_DUMP_STATS".into(), 1)],
    };
    warm.meta.part = Some(coldcache_dump::Part {
        number: 2,
        of: 2,
        trigger: "Program termination".into(),
    });
    warm.meta.mode = coldcache_dump::Mode {
        engine: "fast".into(),
        fallback: String::new(),
        trapped: 12,
        trapped_by: vec![(12, "not handed over yet".into())],
        dispatches: 40,
    };
    let bytes = warm.to_bytes();
    assert!(bytes.windows(6).any(|w| w == b"\"mode\""));
    assert!(bytes.windows(10).any(|w| w == b"\"untraced\""));
    assert!(bytes.windows(6).any(|w| w == b"\"part\""));
    assert!(bytes.windows(7).any(|w| w == b"\"calls\""));
    assert!(bytes.windows(6).any(|w| w == b"\"warm\""));
    assert!(bytes.windows(10).any(|w| w == b"\"schedule\""));
    assert_eq!(Dump::from_bytes(&bytes).unwrap(), warm);
    // A reader without the field (serde's default: unknown keys skipped).
    #[derive(serde::Deserialize)]
    #[allow(dead_code)]
    struct OlderMeta {
        trigger: String,
        instructions: u64,
    }
    let json = serde_json::to_vec(&warm.meta).unwrap();
    let old: OlderMeta = serde_json::from_slice(&json).unwrap();
    assert_eq!(old.instructions, 10);
}

/// Version 5: the version 4 sample with an `OBJS` section (one
/// allocation site on stack 1, the thread's stack as a region).
fn sample_v5() -> Dump {
    use coldcache_dump::{AllocSite, ObjectCounts, ObjectRegion, Objects};
    let counts = |k: u64| ObjectCounts {
        served: [vec![k, 2, 3, 4], vec![5, 6, 7, k]],
        coherence: [0, 0],
    };
    let mut d = sample_v4();
    d.objects = Some(Objects {
        coherence: false,
        named_at_end: false,
        allocators: vec!["malloc".into()],
        allocations: 3,
        frees: 2,
        unknown_frees: 1,
        unreturned: 0,
        live: 1,
        untracked: 4,
        sites: vec![AllocSite {
            stack: 1,
            allocator: "malloc".into(),
            blocks: 3,
            bytes: 192,
            freed: 2,
            counts: counts(7),
        }],
        regions: vec![ObjectRegion {
            start: 0x7fff_0000,
            end: 0x7fff_8000,
            perms: "rw-p".into(),
            path: "[stack]".into(),
            thread: Some(0),
            tls: None,
            counts: counts(9),
        }],
        unmapped: counts(1),
        by_instruction: None,
        globals: None,
        frames: None,
    });
    d
}

#[test]
fn committed_version_5_sample_still_loads() {
    let bytes = committed_sample("v5.ccdump", 5);
    let d = Dump::from_bytes(&bytes).unwrap();
    assert_eq!(d, sample_v5());
    let o = d.objects.as_ref().unwrap();
    assert_eq!(o.sites[0].blocks, 3);
    assert_eq!(o.sites[0].counts.accesses(), 7 + 9 + 18 + 7);
}

/// The `OBJS` section (version 5) round-trips, and a site naming a stack
/// the dump does not have, or a mapping naming a thread it does not have,
/// is refused.
#[test]
fn objects_round_trip_and_a_dangling_stack_is_refused() {
    use coldcache_dump::{AllocSite, ObjectCounts, ObjectRegion, Objects};
    // Version 9: each row's invalidations and false sharing too.
    let counts = |k: u64| ObjectCounts {
        served: [vec![k, 2, 3, 4], vec![5, 6, 7, k]],
        coherence: [k + 1, k / 2],
    };
    let mut d = sample();
    d.objects = Some(Objects {
        coherence: true,
        named_at_end: true,
        allocators: vec!["malloc".into(), "_Znwm".into()],
        allocations: 12_001,
        frees: 12_000,
        unknown_frees: 3,
        unreturned: 1,
        live: 1,
        untracked: 0,
        sites: vec![AllocSite {
            stack: 1,
            allocator: "malloc".into(),
            blocks: 12_000,
            bytes: 1_536_000,
            freed: 11_999,
            counts: counts(12_000),
        }],
        regions: vec![ObjectRegion {
            start: 0x7fff_0000,
            end: 0x7fff_8000,
            perms: "rw-p".into(),
            path: "[stack]".into(),
            thread: Some(0),
            tls: None,
            counts: counts(9),
        }],
        unmapped: counts(1),
        by_instruction: None,
        globals: None,
        frames: None,
    });
    let back = Dump::from_bytes(&d.to_bytes()).unwrap();
    assert_eq!(back.objects, d.objects);
    let o = back.objects.as_ref().unwrap();
    assert_eq!(o.sites[0].counts.accesses(), 12_000 + 9 + 18 + 12_000);
    // Misses of level 1: everything served below it.
    assert_eq!(o.sites[0].counts.misses(1), 2 + 3 + 4 + 6 + 7 + 12_000);
    assert_eq!(o.sites[0].counts.misses(3), 4 + 12_000);
    assert_eq!(o.sites[0].counts.invalidations(), 12_001);
    assert_eq!(o.regions[0].counts.false_sharing(), 4);
    assert!(o.coherence);
    let mut bad = d.clone();
    bad.objects.as_mut().unwrap().sites[0].stack = 2;
    let e = Dump::from_bytes(&bad.to_bytes()).unwrap_err().to_string();
    assert!(e.contains("OBJS") && e.contains("stack 2"), "{e}");
    let mut bad = d.clone();
    bad.objects.as_mut().unwrap().regions[0].tls = Some(1);
    let e = Dump::from_bytes(&bad.to_bytes()).unwrap_err().to_string();
    assert!(e.contains("OBJS") && e.contains("thread 1"), "{e}");
    // Without the section: none.
    assert_eq!(
        Dump::from_bytes(&sample().to_bytes()).unwrap().objects,
        None
    );
}

/// The `OBJI` section (version 7: a site's accesses per instruction;
/// version 8: a mapping's too) round-trips with its `OBJS`; a row naming
/// a site or mapping the `OBJS` section does not have, or an `OBJI`
/// without `OBJS`, is refused; a section without mapping rows reads with
/// none; a dump without it reads `by_instruction` as `None`; a version 7
/// file whose `OBJI` has bytes after its site rows is refused (version 7
/// had none).
#[test]
fn site_instructions_round_trip_and_a_dangling_site_is_refused() {
    use coldcache_dump::{ObjectCounts, SiteInstruction, SiteInstructions};
    let counts = |r: u64, w: u64| ObjectCounts {
        served: [vec![r, 1, 2, 3], vec![w, 0, 0, 1]],
        coherence: [w, 0],
    };
    let mut d = sample_v5();
    // Written now: the current version, whose rows count coherence.
    d.objects.as_mut().unwrap().coherence = true;
    d.objects.as_mut().unwrap().named_at_end = true;
    d.objects.as_mut().unwrap().by_instruction = Some(SiteInstructions {
        rows: vec![
            SiteInstruction {
                site: 0,
                ip: 0x401000,
                counts: counts(5, 0),
            },
            SiteInstruction {
                site: 0,
                ip: 0x401008,
                counts: counts(0, 7),
            },
        ],
        dropped: counts(0, 2),
        ..SiteInstructions::default()
    });
    // Written without mapping rows, the section is what it was before
    // them: its rows only.
    let without = d.to_bytes();
    // With (mapping, instruction) rows: mapping 0 of 1.
    let by = d.objects.as_mut().unwrap().by_instruction.as_mut().unwrap();
    by.regions = vec![SiteInstruction {
        site: 0,
        ip: 0x401010,
        counts: counts(9, 0),
    }];
    by.regions_dropped = counts(1, 0);
    let bytes = d.to_bytes();
    assert!(bytes.len() > without.len());
    assert_eq!(&bytes[8..12], &coldcache_dump::VERSION.to_le_bytes());
    let back = Dump::from_bytes(&bytes).unwrap();
    assert_eq!(back.objects, d.objects);
    let by = back
        .objects
        .as_ref()
        .unwrap()
        .by_instruction
        .as_ref()
        .unwrap();
    assert_eq!(by.rows[1].counts.accesses(), (1 + 2 + 3) + (7 + 1));
    assert_eq!(by.dropped.accesses(), (1 + 2 + 3) + (2 + 1));
    // A row naming site 1 of 1.
    let mut bad = d.clone();
    bad.objects
        .as_mut()
        .unwrap()
        .by_instruction
        .as_mut()
        .unwrap()
        .rows[1]
        .site = 1;
    let e = Dump::from_bytes(&bad.to_bytes()).unwrap_err().to_string();
    assert!(e.contains("OBJI") && e.contains("site 1 of 1"), "{e}");
    // A mapping row naming mapping 1 of 1.
    let mut bad = d.clone();
    bad.objects
        .as_mut()
        .unwrap()
        .by_instruction
        .as_mut()
        .unwrap()
        .regions[0]
        .site = 1;
    let e = Dump::from_bytes(&bad.to_bytes()).unwrap_err().to_string();
    assert!(e.contains("OBJI") && e.contains("mapping 1 of 1"), "{e}");
    // The section without mapping rows reads with none.
    let back = Dump::from_bytes(&without).unwrap();
    let by = back.objects.unwrap().by_instruction.unwrap();
    assert_eq!((by.regions.len(), by.rows.len()), (0, 2));
    // The same bytes marked version 7 (checksum made anew): mapping rows
    // were not part of it (nor, since version 9, the rows' coherence
    // words, which make `OBJS` itself unreadable as version 7).
    let mut v7 = d.to_bytes_dense();
    v7[8..12].copy_from_slice(&7u32.to_le_bytes());
    checksum_anew(&mut v7);
    let e = Dump::from_bytes(&v7).unwrap_err().to_string();
    assert!(e.contains("OBJI") || e.contains("OBJS"), "{e}");
    // An OBJI section without OBJS: the sections of a good dump with OBJS
    // renamed, the checksum made anew.
    let mut orphan = bytes.clone();
    let at = orphan.windows(4).position(|w| w == b"OBJS").unwrap();
    orphan[at..at + 4].copy_from_slice(b"XOBJ");
    checksum_anew(&mut orphan);
    let e = Dump::from_bytes(&orphan).unwrap_err().to_string();
    assert!(e.contains("OBJI") && e.contains("without OBJS"), "{e}");
    // Without the section (an older capture): no per-instruction data.
    let mut old = d.clone();
    old.objects.as_mut().unwrap().by_instruction = None;
    let back = Dump::from_bytes(&old.to_bytes()).unwrap();
    assert_eq!(back.objects.unwrap().by_instruction, None);
}

/// The `OBJG` section (version 10: the modules' globals and their
/// accesses per instruction) round-trips with its `OBJS`; a global naming
/// a mapping the `OBJS` section does not have, a row naming a global the
/// section does not have, or an `OBJG` without `OBJS` is refused; a dump
/// without it reads `globals` as `None`; the same bytes marked version 9
/// read without globals (the section is unknown to version 9).
#[test]
fn globals_and_frames_round_trip_and_dangling_references_are_refused() {
    use coldcache_dump::{Globals, ObjectCounts, ObjectGlobal, SiteInstruction};
    let counts = |r: u64, w: u64| ObjectCounts {
        served: [vec![r, 1, 2, 3], vec![w, 0, 0, 1]],
        coherence: [w, 0],
    };
    let mut d = sample_v5();
    d.objects.as_mut().unwrap().coherence = true;
    d.objects.as_mut().unwrap().named_at_end = true;
    d.objects.as_mut().unwrap().globals = Some(Globals {
        rows: vec![
            ObjectGlobal {
                region: 0,
                name: "table".into(),
                start: 0x7fff_0100,
                size: 4000,
                counts: counts(1000, 0),
            },
            ObjectGlobal {
                region: 0,
                name: "f()::calls".into(),
                start: 0x7fff_2000,
                size: 8,
                counts: counts(1, 1),
            },
        ],
        by_instruction: vec![
            SiteInstruction {
                site: 1,
                ip: 0x401000,
                counts: counts(1, 0),
            },
            SiteInstruction {
                site: 0,
                ip: 0x401008,
                counts: counts(1000, 0),
            },
        ],
        dropped: counts(0, 1),
    });
    let bytes = d.to_bytes();
    assert_eq!(&bytes[8..12], &coldcache_dump::VERSION.to_le_bytes());
    let back = Dump::from_bytes(&bytes).unwrap();
    assert_eq!(back.objects, d.objects);
    let g = back.objects.as_ref().unwrap().globals.as_ref().unwrap();
    assert_eq!(g.rows[0].counts.accesses(), 1000 + 1 + 2 + 3 + 1);
    assert_eq!(g.rows[1].name, "f()::calls");
    // A global in mapping 1 of 1.
    let mut bad = d.clone();
    bad.objects.as_mut().unwrap().globals.as_mut().unwrap().rows[1].region = 1;
    let e = Dump::from_bytes(&bad.to_bytes()).unwrap_err().to_string();
    assert!(e.contains("OBJG") && e.contains("mapping 1 of 1"), "{e}");
    // A row naming global 2 of 2.
    let mut bad = d.clone();
    bad.objects
        .as_mut()
        .unwrap()
        .globals
        .as_mut()
        .unwrap()
        .by_instruction[0]
        .site = 2;
    let e = Dump::from_bytes(&bad.to_bytes()).unwrap_err().to_string();
    assert!(e.contains("OBJG") && e.contains("global 2 of 2"), "{e}");
    // An OBJG section without OBJS.
    let mut orphan = bytes.clone();
    let at = orphan.windows(4).position(|w| w == b"OBJS").unwrap();
    orphan[at..at + 4].copy_from_slice(b"XOBJ");
    checksum_anew(&mut orphan);
    let e = Dump::from_bytes(&orphan).unwrap_err().to_string();
    assert!(e.contains("OBJG") && e.contains("without OBJS"), "{e}");
    // Marked version 9 (checksum made anew): the section is not read.
    let mut v9 = d.to_bytes_dense();
    v9[8..12].copy_from_slice(&9u32.to_le_bytes());
    checksum_anew(&mut v9);
    let back = Dump::from_bytes(&v9).unwrap();
    assert_eq!(back.objects.unwrap().globals, None);
    // Stack frames (OBJF): round trip, and a frame naming stack 2 of 2.
    let mut f = d.clone();
    f.objects.as_mut().unwrap().frames = Some(coldcache_dump::StackFrames {
        rows: vec![coldcache_dump::FrameCounts {
            stack: 1,
            counts: counts(512, 256),
        }],
        dropped: 4,
        slots: vec![
            coldcache_dump::SlotCounts {
                pc: 0x40_1000,
                below: 24,
                counts: counts(256, 0),
            },
            coldcache_dump::SlotCounts {
                pc: 0x40_1004,
                below: 8,
                counts: counts(0, 1),
            },
        ],
        slots_dropped: counts(3, 0),
    });
    let back = Dump::from_bytes(&f.to_bytes()).unwrap();
    assert_eq!(back.objects, f.objects);
    // Its slots (OBJL, version 11): not read when marked version 10.
    let mut v10 = f.to_bytes_dense();
    v10[8..12].copy_from_slice(&10u32.to_le_bytes());
    checksum_anew(&mut v10);
    let back = Dump::from_bytes(&v10).unwrap();
    let frames = back.objects.unwrap().frames.unwrap();
    assert_eq!((frames.rows.len(), frames.slots.len()), (1, 0));
    f.objects.as_mut().unwrap().frames.as_mut().unwrap().rows[0].stack = 2;
    let e = Dump::from_bytes(&f.to_bytes()).unwrap_err().to_string();
    assert!(e.contains("OBJF") && e.contains("stack 2 of 2"), "{e}");
    // Without it: none.
    let mut old = d.clone();
    old.objects.as_mut().unwrap().globals = None;
    let back = Dump::from_bytes(&old.to_bytes()).unwrap();
    assert_eq!(back.objects.unwrap().globals, None);
}

/// Version 6: a real capture with a `TIME` section, made by
/// `setarch -R coldcache record --function work --timeline -o
/// v6-timeline.ccdump ./calls` (tests-programs/timeline/calls.c built
/// `gcc -O1 -g -pthread`; resolved, sources embedded): `work` calls a()
/// three times (each calls c()) and b() once. Its 17 events are work's
/// start, 15 stack changes and the stop; their deltas sum to the dump's
/// totals of the same counters.
#[test]
fn committed_version_6_timeline_sample_loads() {
    use coldcache_dump::TimeKind;
    let bytes = committed_sample("v6-timeline.ccdump", 6);
    let d = Dump::from_bytes(&bytes).unwrap();
    let t = d.timeline.as_ref().expect("a TIME section");
    assert_eq!(
        t.counters,
        [
            "instructions",
            "i_L1",
            "i_L2",
            "i_mem",
            "r_L1",
            "r_L2",
            "r_mem",
            "w_L1",
            "w_L2",
            "w_mem"
        ]
    );
    assert_eq!(t.dropped, 0);
    let events = t.events();
    assert_eq!(events.len(), 17);
    assert_eq!(events[0].0.kind, TimeKind::Start);
    assert_eq!(events[16].0.kind, TimeKind::Stop);
    assert!(events[1..16].iter().all(|e| e.0.kind == TimeKind::Move));
    assert!(events.iter().all(|e| e.0.thread == 0));
    // Calls and returns alternate around work's stack: a, c, back to a,
    // back to work, three times, then b and back, then work's caller.
    let work = events[0].0.stack;
    let depth = |s: u32| d.stack_frames(s).len() as i64;
    let steps: Vec<i64> = events[1..16]
        .iter()
        .map(|e| depth(e.0.stack) - depth(work))
        .collect();
    assert_eq!(steps, [1, 2, 1, 0, 1, 2, 1, 0, 1, 2, 1, 0, 1, 0, -1]);
    let totals = d.totals();
    for (k, name) in t.counters.iter().enumerate() {
        let sum: u64 = events.iter().map(|e| e.1[k]).sum();
        assert_eq!(sum, totals[d.counter(name).unwrap()], "{name}");
    }
    assert_eq!(Dump::from_bytes(&d.to_bytes()).unwrap(), d);
}

/// The `TIME` section round-trips; an event naming a stack or thread the
/// dump does not have, or an unknown kind, is refused; a dump without it
/// has none.
#[test]
fn timeline_round_trips_and_bad_events_are_refused() {
    use coldcache_dump::{TimeEvent, TimeKind, Timeline};
    let mut d = sample();
    let ev = |kind, stack| TimeEvent {
        thread: 0,
        kind,
        stack,
    };
    let timeline = |second: TimeEvent| {
        let mut t = Timeline::new(vec!["instructions".into(), "r_mem".into()], 4, 4096);
        t.push(ev(TimeKind::Start, 0), &[0, 0]);
        t.push(second, &[10, 2]);
        t.push(ev(TimeKind::Stop, 0), &[300, 1]);
        t
    };
    d.timeline = Some(timeline(ev(TimeKind::Move, 1)));
    let back = Dump::from_bytes(&d.to_bytes()).unwrap();
    assert_eq!(back.timeline, d.timeline);
    let events = back.timeline.as_ref().unwrap().events();
    assert_eq!(events.len(), 3);
    assert_eq!(events[1], (ev(TimeKind::Move, 1), vec![10, 2]));
    assert_eq!(events[2], (ev(TimeKind::Stop, 0), vec![300, 1]));
    let mut bad = d.clone();
    bad.timeline = Some(timeline(ev(TimeKind::Move, 99)));
    let e = Dump::from_bytes(&bad.to_bytes()).unwrap_err().to_string();
    assert!(e.contains("TIME") && e.contains("stack 99"), "{e}");
    let mut bad = d.clone();
    bad.timeline = Some(timeline(TimeEvent {
        thread: 5,
        ..ev(TimeKind::Move, 1)
    }));
    let e = Dump::from_bytes(&bad.to_bytes()).unwrap_err().to_string();
    assert!(e.contains("TIME") && e.contains("thread 5"), "{e}");
    // Kind 3 does not exist: the tag's low bits, patched in the bytes.
    let mut b = d.to_bytes();
    let at = b.windows(4).position(|w| w == b"TIME").unwrap();
    // The payload: counters (1 + 2 strings), dropped, limit, count, then
    // the first event's thread and tag.
    let payload = at + 12;
    let tag = payload + 1 + 13 + 6 + 1 + 2 + 1 + 1;
    assert_eq!(b[tag], 1, "the first event's tag (stack 0, start)");
    b[tag] = 3;
    let n = b.len();
    let crc = crc32fast::hash(&b[..n - 12]);
    b[n - 4..].copy_from_slice(&crc.to_le_bytes());
    let e = Dump::from_bytes(&b).unwrap_err().to_string();
    assert!(e.contains("TIME") && e.contains("unknown kind 3"), "{e}");
    assert_eq!(
        Dump::from_bytes(&sample().to_bytes()).unwrap().timeline,
        None
    );
}

/// Version 7: a real capture with `OBJI`, made by `setarch -R coldcache
/// record --no-resolve --allocator pool_alloc=size2 --allocator
/// pool_free=free2 --function work -o v7-objects.ccdump ./pool`
/// (tests-programs/data/pool.c built `gcc -O1 -g`): one site, 64 blocks
/// read 192 times and written 320 times (the program's header), and its
/// per-instruction rows summing to the site's accesses, side by side.
#[test]
fn committed_version_7_objects_sample_loads() {
    let bytes = committed_sample("v7-objects.ccdump", 7);
    let d = Dump::from_bytes(&bytes).unwrap();
    let o = d.objects.as_ref().expect("an OBJS section");
    assert_eq!(o.sites.len(), 1);
    let site = &o.sites[0];
    assert_eq!(site.allocator, "pool_alloc");
    assert_eq!((site.blocks, site.bytes, site.freed), (64, 2_560, 64));
    let side = |c: &coldcache_dump::ObjectCounts, s: usize| c.served[s].iter().sum::<u64>();
    assert_eq!((side(&site.counts, 0), side(&site.counts, 1)), (192, 320));
    let by = o.by_instruction.as_ref().expect("an OBJI section");
    assert_eq!(by.dropped.accesses(), 0);
    for s in 0..2 {
        let sum: u64 = by.rows.iter().map(|r| side(&r.counts, s)).sum();
        assert_eq!(sum, side(&site.counts, s), "side {s}");
    }
}

/// Version 8: a real capture with `OBJI`'s mapping rows, made by
/// `setarch -R coldcache record --no-resolve --objects --function
/// scene_visit -o v8-objects.ccdump ./objects earlier 64`
/// (tests-programs/data/objects.cpp built `g++ -O1 -g -Wl,-z,now`): 64
/// `Scene`s made before the window, their `pos.x/y/z` and the pointer
/// array read once each in it: 256 reads of the heap allocated earlier,
/// no allocation, and the heap's per-instruction rows summing to them
/// (the thread's stack has none).
#[test]
fn committed_version_8_mapping_rows_sample_loads() {
    let bytes = committed_sample("v8-objects.ccdump", 8);
    let d = Dump::from_bytes(&bytes).unwrap();
    let o = d.objects.as_ref().expect("an OBJS section");
    assert!(o.sites.is_empty());
    // Before version 9 no row counted coherence: the views say so.
    assert!(!o.coherence);
    assert!(o.regions.iter().all(|r| r.counts.coherence == [0, 0]));
    let heap = o
        .regions
        .iter()
        .position(|r| r.path == "[heap]")
        .expect("a [heap] mapping");
    let side = |c: &coldcache_dump::ObjectCounts, s: usize| c.served[s].iter().sum::<u64>();
    let counts = &o.regions[heap].counts;
    assert_eq!((side(counts, 0), side(counts, 1)), (256, 0));
    let by = o.by_instruction.as_ref().expect("an OBJI section");
    assert_eq!(by.regions_dropped.accesses(), 0);
    assert!(by.rows.is_empty());
    let sum: u64 = by
        .regions
        .iter()
        .filter(|r| r.site as usize == heap)
        .map(|r| side(&r.counts, 0))
        .sum();
    assert_eq!(sum, 256);
    for r in &by.regions {
        assert!(o.regions[r.site as usize].thread.is_none(), "a stack's row");
    }
}

/// Version 9: a real capture with coherence counts per object and no
/// `OBJG`, made by `setarch -R coldcache record --no-resolve --objects
/// --function global -o v9-objects.ccdump ./objects global`
/// (tests-programs/data/objects.cpp built `g++ -O1 -g -Wl,-z,relro,-z,now`):
/// 1,000 reads of the global `table`, which a version 9 dump counts in the
/// executable's data mapping (no globals of their own), and the mapping's
/// per-instruction rows summing to them.
#[test]
fn committed_version_9_objects_sample_loads() {
    let bytes = committed_sample("v9-objects.ccdump", 9);
    let d = Dump::from_bytes(&bytes).unwrap();
    let o = d.objects.as_ref().expect("an OBJS section");
    assert!(o.coherence);
    assert_eq!(o.globals, None);
    let data = o
        .regions
        .iter()
        .position(|r| r.path.ends_with("/objects") && r.perms.starts_with("rw"))
        .expect("the executable's data mapping");
    let side = |c: &coldcache_dump::ObjectCounts, s: usize| c.served[s].iter().sum::<u64>();
    assert_eq!(
        (
            side(&o.regions[data].counts, 0),
            side(&o.regions[data].counts, 1)
        ),
        (1000, 0)
    );
    let by = o.by_instruction.as_ref().expect("an OBJI section");
    let sum: u64 = by
        .regions
        .iter()
        .filter(|r| r.site as usize == data)
        .map(|r| r.counts.accesses())
        .sum();
    assert_eq!(sum, 1000);
}

/// Version 10: a real capture with globals and frames and no slots, made
/// by `setarch -R coldcache record --no-resolve --objects --function
/// frames -o v10-frames.ccdump ./objects frames` with the coldcache of
/// commit 6d5c34a (tests-programs/data/objects.cpp built `g++ -O1 -g
/// -Wl,-z,relro,-z,now`): `fill` writes the 64 ints of its caller's array,
/// which `frames()` then reads, so the frames' rows hold 65 writes and 65
/// reads in one frame (with the call's push and the `ret`) and a read in
/// the other (`fill`'s `ret`); no `OBJL`, no `LOCL`.
#[test]
fn committed_version_10_frames_sample_loads() {
    let bytes = committed_sample("v10-frames.ccdump", 10);
    let d = Dump::from_bytes(&bytes).unwrap();
    let o = d.objects.as_ref().expect("an OBJS section");
    assert!(o.globals.is_some());
    let f = o.frames.as_ref().expect("an OBJF section");
    assert!(f.slots.is_empty());
    assert_eq!(f.slots_dropped.accesses(), 0);
    assert_eq!(frame_rows(f), [(1, 0), (65, 65)]);
    assert!(d.data.as_ref().is_none_or(|t| t.slots.is_empty()));
}

/// Version 12: the capture of version 10's sample made again, by `setarch
/// -R coldcache record --no-resolve --objects --function frames -o
/// v12-frames.ccdump ./objects frames` with the coldcache of commit
/// 6ec0897 (the program built as there): its records in `RECZ`. The
/// frames' rows as version 10's (what the program does); 717
/// instructions, the records' sum; the same records with every counter
/// (`RECS`) read the same.
#[test]
fn committed_version_12_sparse_sample_loads() {
    let bytes = committed_sample("v12-frames.ccdump", 12);
    assert!(section(&bytes, b"RECS").is_none());
    let (_, recz) = section(&bytes, b"RECZ").unwrap();
    let d = Dump::from_bytes(&bytes).unwrap();
    assert_eq!(d.meta.instructions, 717);
    let i = CounterLayout::INSTRUCTIONS;
    assert_eq!(d.meta.counters[i], "instructions");
    assert_eq!(d.records.iter().map(|r| r.counters[i]).sum::<u64>(), 717);
    let f = d.objects.as_ref().unwrap().frames.as_ref().unwrap();
    assert_eq!(frame_rows(f), [(1, 0), (65, 65)]);
    let dense = d.to_bytes_dense();
    assert!(section(&dense, b"RECS").unwrap().1.len() > 2 * recz.len());
    assert_eq!(Dump::from_bytes(&dense).unwrap(), d);
}

/// The (reads, writes) of each row of the frames `f`, sorted.
fn frame_rows(f: &coldcache_dump::objects::StackFrames) -> Vec<(u64, u64)> {
    let mut rows: Vec<(u64, u64)> = f
        .rows
        .iter()
        .map(|r| (r.counts.side(0), r.counts.side(1)))
        .collect();
    rows.sort_unstable();
    rows
}

/// The bytes of the committed sample `tests/data/NAME`, checked to be of
/// format version `version`.
fn committed_sample(name: &str, version: u32) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(
        &bytes[8..12],
        &version.to_le_bytes(),
        "{name} is version {version}"
    );
    bytes
}

/// The payload of section `tag` of a dump's bytes, and where it starts.
fn section(bytes: &[u8], tag: &[u8; 4]) -> Option<(usize, Vec<u8>)> {
    let mut pos = 16;
    while pos + 12 <= bytes.len() - 12 {
        let len = u64::from_le_bytes(bytes[pos + 4..pos + 12].try_into().unwrap()) as usize;
        if &bytes[pos..pos + 4] == tag {
            return Some((pos + 12, bytes[pos + 12..pos + 12 + len].to_vec()));
        }
        pos += 12 + len;
    }
    None
}

/// Version 12's records (`RECZ`): per record a mask of its counters that
/// are not 0, then those only. The bytes by hand; the same dump with every
/// counter (`RECS`, as before) reads the same.
#[test]
fn records_are_written_sparse_and_read_in_either_form() {
    let mut d = Dump {
        meta: Meta {
            counters: vec!["instructions".into(), "a".into(), "b".into()],
            ..Meta::default()
        },
        stacks: vec![StackNode::default()],
        threads: vec![Thread {
            tid: 1,
            name: "t".into(),
            core: 0,
        }],
        ..Dump::default()
    };
    d.records = vec![
        Record {
            ip: 0x1000,
            stack: 0,
            thread: 0,
            counters: vec![5, 0, 7],
        },
        Record {
            ip: 0x1004,
            stack: 0,
            thread: 0,
            counters: vec![0, 0, 0],
        },
    ];
    let bytes = d.to_bytes();
    assert!(section(&bytes, b"RECS").is_none());
    let (at, recz) = section(&bytes, b"RECZ").unwrap();
    #[rustfmt::skip]
    let want = [
        3, 2,                   // counters, records
        0x80, 0x40, 0, 0,       // ip 0x1000 (zigzag 0x2000), stack, thread
        0b101, 5, 7,            // counters 0 and 2, their values
        8, 0, 0,                // ip +4, stack, thread
        0,                      // no counter
    ];
    assert_eq!(recz, want);
    assert_eq!(Dump::from_bytes(&bytes).unwrap(), d);
    let dense = d.to_bytes_dense();
    assert!(section(&dense, b"RECZ").is_none());
    // Every counter of each: 2 + (ip 2, stack, thread, 3) + (ip 1, 2, 3).
    assert_eq!(section(&dense, b"RECS").unwrap().1.len(), 2 + 7 + 6);
    assert_eq!(Dump::from_bytes(&dense).unwrap(), d);
    // A mask naming a fourth counter of three.
    let mut bad = bytes.clone();
    bad[at + 6] = 0b1101;
    checksum_anew(&mut bad);
    let e = Dump::from_bytes(&bad).unwrap_err().to_string();
    assert!(
        e.contains("RECZ") && e.contains("record 0") && e.contains("past the 3"),
        "{e}"
    );
    // Records in both sections.
    let (_, recs) = section(&dense, b"RECS").unwrap();
    let mut both = bytes[..bytes.len() - 12].to_vec();
    both.extend_from_slice(b"RECS");
    both.extend_from_slice(&(recs.len() as u64).to_le_bytes());
    both.extend_from_slice(&recs);
    both.extend_from_slice(&bytes[bytes.len() - 12..]);
    checksum_anew(&mut both);
    let e = Dump::from_bytes(&both).unwrap_err().to_string();
    assert!(e.contains("more than one section of records"), "{e}");
    // Marked version 11, `RECZ` is a section it did not know: no records.
    let mut v11 = bytes.clone();
    v11[8..12].copy_from_slice(&11u32.to_le_bytes());
    checksum_anew(&mut v11);
    let e = Dump::from_bytes(&v11).unwrap_err().to_string();
    assert!(e.contains("RECS"), "{e}");
    // More than 64 counters: a mask per 64.
    let mut wide = d.clone();
    wide.meta.counters = (0..70).map(|i| format!("c{i}")).collect();
    wide.records[0].counters = (0..70)
        .map(|i| if i % 33 == 0 { i + 1 } else { 0 })
        .collect();
    wide.records[1].counters = vec![0; 70];
    wide.records[1].counters[69] = 1 << 40;
    assert_eq!(Dump::from_bytes(&wide.to_bytes()).unwrap(), wide);
}

/// Makes a dump's checksum anew after its bytes were changed (the last 4
/// bytes: the CRC-32 of everything before the 8-byte trailer).
fn checksum_anew(bytes: &mut [u8]) {
    let n = bytes.len() - 4;
    let crc = crc32fast::hash(&bytes[..n - 8]);
    bytes[n..].copy_from_slice(&crc.to_le_bytes());
}
