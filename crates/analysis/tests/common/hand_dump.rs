//! A small resolved dump whose every view is computed by hand (see the
//! table in `tests/hand.rs`). Shared with the export tests through
//! `#[path]`: `main` calls `update` and `render`, both inlining `get_pos`,
//! and `rec`, which calls itself once.

use coldcache_dump::*;

const NC: usize = 15; // 2 levels

pub fn counters(instr: u64, r_l1: u64, r_mem: u64, w_l1: u64, w_mem: u64) -> Vec<u64> {
    let mut c = vec![0u64; NC];
    c[0] = instr;
    c[2] = instr; // i_L1: every fetch hits
    c[5] = r_l1;
    c[7] = r_mem;
    c[8] = w_l1;
    c[10] = w_mem;
    c
}

fn f(name: &str, entry: u64, file: u32, line: u32) -> Function {
    Function {
        name: name.into(),
        module: 0,
        entry,
        file,
        line,
    }
}

fn loc(addr: u64, frames: &[(u32, u32, u32)]) -> Location {
    Location {
        addr,
        frames: frames
            .iter()
            .map(|&(function, file, line)| Frame {
                function,
                file,
                line,
            })
            .collect(),
        code: vec![0x90],
    }
}

pub fn dump(b_mem: u64) -> Dump {
    let levels = vec!["L1".to_string(), "L2".to_string()];
    let names = CounterLayout::new(levels.len()).names(&levels);
    assert_eq!(names.len(), NC);
    // files: 0 m.c, 1 u.c, 2 r.c, 3 pos.h
    let symbols = Symbols {
        files: vec![
            "/s/m.c".into(),
            "/s/u.c".into(),
            "/s/r.c".into(),
            "/s/pos.h".into(),
        ],
        functions: vec![
            f("main", 0x1000, 0, 8),
            f("update", 0x2000, 1, 19),
            f("get_pos", 0, 3, 2),
            f("render", 0x3000, 2, 29),
            f("rec", 0x4000, 2, 39),
        ],
        locations: vec![
            loc(0x1000, &[(0, 0, 9)]),
            loc(0x1010, &[(0, 0, 10)]),
            loc(0x1020, &[(0, 0, 11)]),
            loc(0x1030, &[(0, 0, 12)]),
            loc(0x2000, &[(1, 1, 19)]),
            loc(0x2004, &[(2, 3, 3), (1, 1, 20)]),
            loc(0x2008, &[(1, 1, 21)]),
            loc(0x3000, &[(3, 2, 29)]),
            loc(0x3004, &[(2, 3, 3), (3, 2, 30)]),
            loc(0x4000, &[(4, 2, 39)]),
            loc(0x4004, &[(4, 2, 40)]),
            loc(0x4010, &[(4, 2, 41)]),
        ],
        modules: vec![ModuleSymbols {
            status: ModuleStatus::Lines,
            detail: String::new(),
        }],
    };
    Dump {
        meta: Meta {
            program: vec!["prog".into()],
            cache_name: "test".into(),
            levels,
            cores: 2,
            counters: names,
            ..Meta::default()
        },
        modules: vec![Module {
            path: "/bin/prog".into(),
            build_id: vec![],
            start: 0,
            end: 0x10000,
            file_offset: 0,
        }],
        threads: vec![
            Thread {
                tid: 100,
                name: "main".into(),
                core: 0,
            },
            Thread {
                tid: 101,
                name: "worker".into(),
                core: 1,
            },
        ],
        stacks: vec![
            StackNode::default(),
            StackNode {
                parent: 0,
                call_site: 0x1010,
                callee: 0x2000,
            },
            StackNode {
                parent: 0,
                call_site: 0x1020,
                callee: 0x3000,
            },
            StackNode {
                parent: 0,
                call_site: 0x1030,
                callee: 0x4000,
            },
            StackNode {
                parent: 3,
                call_site: 0x4010,
                callee: 0x4000,
            },
        ],
        records: vec![
            Record {
                ip: 0x1000,
                stack: 0,
                thread: 0,
                counters: counters(1, 0, 0, 0, 0),
            },
            Record {
                ip: 0x2004,
                stack: 1,
                thread: 0,
                counters: counters(10, 10 - b_mem, b_mem, 0, 0),
            },
            Record {
                ip: 0x2008,
                stack: 1,
                thread: 0,
                counters: counters(5, 5, 0, 0, 0),
            },
            Record {
                ip: 0x3004,
                stack: 2,
                thread: 0,
                counters: counters(10, 8, 2, 0, 0),
            },
            Record {
                ip: 0x4004,
                stack: 3,
                thread: 0,
                counters: counters(2, 0, 0, 2, 0),
            },
            Record {
                ip: 0x4004,
                stack: 4,
                thread: 1,
                counters: counters(2, 0, 0, 1, 1),
            },
        ],
        symbols: Some(symbols),
        sources: Vec::new(),
        data: None,
        objects: None,
        timeline: None,
    }
}
