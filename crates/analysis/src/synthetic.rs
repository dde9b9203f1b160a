//! A synthetic resolved dump of any size, for benchmarks and load tests
//! (`cargo bench -p coldcache-analysis`, the web UI's timing). Deterministic:
//! the same parameters always give the same dump.
//!
//! Shape: `functions` out-of-line functions of 64 instructions each (every
//! eighth instruction runs code of one of `functions / 10` inlined helpers),
//! a random stack tree of `stacks` call sites, and `records` distinct
//! (instruction, stack, thread) records over 4 threads with small counters.

use coldcache_dump::*;

/// Sizes of a synthetic dump.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Out-of-line functions.
    pub functions: u32,
    /// Stack-tree nodes.
    pub stacks: u32,
    /// Records.
    pub records: u32,
}

impl Default for Shape {
    fn default() -> Self {
        Shape {
            functions: 2000,
            stacks: 50_000,
            records: 1_000_000,
        }
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const BASE: u64 = 0x40_0000;
const FN_SIZE: u64 = 0x100;

/// Builds the dump.
pub fn dump(shape: Shape) -> Dump {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let levels = vec!["L1".to_string(), "L2".to_string()];
    let layout = CounterLayout::new(levels.len());
    let names = layout.names(&levels);
    let nc = names.len();
    let nf = shape.functions.max(1) as u64;
    let ninl = (nf / 10).max(1);
    let mut functions: Vec<Function> = (0..nf)
        .map(|i| Function {
            name: format!("ns::function_{i}(int)"),
            module: 0,
            entry: BASE + i * FN_SIZE,
            file: (i % 200) as u32,
            line: 10 + (i as u32 % 50) * 20,
        })
        .collect();
    functions.extend((0..ninl).map(|i| Function {
        name: format!("inline_helper_{i}"),
        module: 0,
        entry: 0,
        file: 200 + (i % 20) as u32,
        line: 5,
    }));
    let mut locations = Vec::with_capacity((nf * 64) as usize);
    for f in 0..nf {
        for k in 0..64u64 {
            let addr = BASE + f * FN_SIZE + k * 4;
            let own = Frame {
                function: f as u32,
                file: (f % 200) as u32,
                line: functions[f as usize].line + 1 + (k / 4) as u32,
            };
            let frames = if k % 8 == 7 {
                let h = (f * 7 + k) % ninl;
                vec![
                    Frame {
                        function: (nf + h) as u32,
                        file: 200 + (h % 20) as u32,
                        line: 6 + (k % 3) as u32,
                    },
                    own,
                ]
            } else {
                vec![own]
            };
            locations.push(Location {
                addr,
                frames,
                code: vec![0x48, 0x8b, 0x07, 0x90], // mov rax, [rdi]
            });
        }
    }
    let files: Vec<String> = (0..200)
        .map(|i| format!("/src/project/module_{i}.cpp"))
        .chain((0..20).map(|i| format!("/src/project/include/helpers_{i}.h")))
        .collect();
    // Stack tree: parents biased to recent nodes so depth grows to ~20.
    let mut stacks = vec![StackNode::default()];
    let mut depth = vec![0u32];
    for s in 1..shape.stacks.max(1) as u64 {
        let parent = if depth.len() < 8 || rng.below(10) == 0 {
            rng.below(s.min(8))
        } else {
            let back = 1 + rng.below(s.min(64));
            let p = s - back;
            if depth[p as usize] > 24 {
                rng.below(8)
            } else {
                p
            }
        };
        let caller = if parent == 0 {
            0
        } else {
            (stacks[parent as usize].callee - BASE) / FN_SIZE
        };
        let callee = rng.below(nf);
        stacks.push(StackNode {
            parent: parent as u32,
            call_site: BASE + caller * FN_SIZE + rng.below(64) * 4,
            callee: BASE + callee * FN_SIZE,
        });
        depth.push(depth[parent as usize] + 1);
    }
    let ns = stacks.len() as u64;
    let mut keys: Vec<(u64, u32, u32)> = (0..shape.records as u64 + shape.records as u64 / 8)
        .map(|_| {
            let s = 1 + rng.below(ns - 1).min(ns - 2);
            let f = (stacks[s as usize].callee - BASE) / FN_SIZE;
            (
                BASE + f * FN_SIZE + rng.below(64) * 4,
                s as u32,
                rng.below(4) as u32,
            )
        })
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys.truncate(shape.records as usize);
    let records = keys
        .into_iter()
        .map(|(ip, stack, thread)| {
            let mut c = vec![0u64; nc];
            let n = 1 + rng.below(20);
            c[CounterLayout::INSTRUCTIONS] = n;
            c[layout.served(Side::Instr, 0)] = n;
            let reads = rng.below(3);
            let missed = if rng.below(8) == 0 { reads } else { 0 };
            c[layout.served(Side::Read, 0)] = reads - missed;
            c[layout.memory(Side::Read)] = missed;
            c[layout.served(Side::Write, 0)] = rng.below(2);
            Record {
                ip,
                stack,
                thread,
                counters: c,
            }
        })
        .collect();
    let end = BASE + nf * FN_SIZE;
    Dump {
        meta: Meta {
            program: vec!["synthetic".into()],
            cache_name: "synthetic".into(),
            levels,
            cores: 4,
            threads: "all".into(),
            trigger: "api".into(),
            counters: names,
            ..Meta::default()
        },
        modules: vec![Module {
            path: "/src/project/synthetic".into(),
            build_id: vec![],
            start: BASE,
            end,
            file_offset: 0,
        }],
        threads: (0..4)
            .map(|t| Thread {
                tid: 1000 + t,
                name: format!("worker{t}"),
                core: t,
            })
            .collect(),
        stacks,
        records,
        symbols: Some(Symbols {
            files,
            functions,
            locations,
            modules: vec![ModuleSymbols {
                status: ModuleStatus::Lines,
                detail: "synthetic".into(),
            }],
        }),
        sources: Vec::new(),
        data: None,
        objects: None,
        timeline: None,
    }
}
