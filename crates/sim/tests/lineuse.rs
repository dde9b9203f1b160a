//! Line utilisation (`coldcache_sim::lineuse`): a hand-computed sequence,
//! and random traces against a naive model of a set-associative LRU data
//! cache that keeps each line's bytes and fetching row itself.

use coldcache_sim::presets::Geometry;
use coldcache_sim::*;

/// A D1 of one set of two 64-byte ways (and a big LL), Cachegrind's rules.
fn tiny() -> HierarchyConfig {
    presets::cachegrind(
        Geometry::new(32 << 10, 8, 64),
        Geometry::new(128, 2, 64),
        Geometry::new(1 << 20, 16, 64),
    )
}

/// `(row, kind, addr, size)` through `Driver::attribute`, one row per
/// access; gives per row (lines fetched, bytes used).
fn run(d: Driver, seq: &[(u32, AccessKind, u64, u32)], rows: usize) -> Vec<(u64, u64)> {
    let mut d = d.with_line_use();
    let l = d.layout();
    let (f, u) = (l.lines_fetched().unwrap(), l.bytes_used().unwrap());
    let mut table = vec![vec![0u64; l.len()]; rows];
    for &(row, kind, addr, size) in seq {
        d.set_fill_row(row);
        d.attribute(0, Access::new(kind, addr, size), &mut table[row as usize]);
        d.drain_line_use(|r, b| {
            table[r as usize][f] += 1;
            table[r as usize][u] += b;
        });
    }
    d.finish_line_use(|r, b| {
        table[r as usize][f] += 1;
        table[r as usize][u] += b;
    });
    assert_eq!(d.line_use_lost(), 0);
    table.iter().map(|r| (r[f], r[u])).collect()
}

/// The same through `Driver::attribute_batch` and a `RowTable`.
fn run_batch(d: Driver, seq: &[(u32, AccessKind, u64, u32)], rows: usize) -> Vec<(u64, u64)> {
    let mut d = d.with_line_use();
    let l = d.layout();
    let mut table = RowTable::new(l);
    table.grow_to(rows);
    let acc: Vec<Access> = seq
        .iter()
        .map(|&(_, k, a, s)| Access::new(k, a, s))
        .collect();
    let rws: Vec<u32> = seq.iter().map(|s| s.0).collect();
    for (a, r) in acc.chunks(7).zip(rws.chunks(7)) {
        d.attribute_batch(0, a, r, &mut table);
    }
    d.finish_line_use_into(&mut table);
    (0..rows as u32)
        .map(|r| {
            (
                table.get(r, l.lines_fetched().unwrap()),
                table.get(r, l.bytes_used().unwrap()),
            )
        })
        .collect()
}

/// By hand, D1 = one set of two ways, LRU:
/// 1. row 0 reads 0x1000 (1 byte): miss, line A fetched by row 0;
/// 2. row 1 reads 0x1001..0x1002 and 0x1000 again: hits; A's bytes {0,1,2};
/// 3. row 1 reads 0x2000 (4 bytes): miss, line B fetched by row 1;
/// 4. row 2 reads 8 bytes at 0x303c: lines C (bytes 60..63) and D (0..3),
///    both fetched by row 2; C evicts A (3 bytes to row 0), D evicts B
///    (4 bytes to row 1);
/// 5. row 3 reads 8 bytes at 0x1000: A fetched anew by row 3, evicting C
///    (4 bytes to row 2);
/// 6. row 3 writes 0x1010 (2 bytes): a hit, A now 10 bytes;
/// 7. the end: D (4 bytes, row 2) and A (10 bytes, row 3).
#[test]
fn hand_computed_sequence() {
    use AccessKind::*;
    let seq = [
        (0, Read, 0x1000, 1),
        (1, Read, 0x1001, 2),
        (1, Read, 0x1000, 1),
        (1, Read, 0x2000, 4),
        (2, Read, 0x303c, 8),
        (3, Read, 0x1000, 8),
        (3, Write, 0x1010, 2),
    ];
    let want = vec![(1, 3), (1, 4), (2, 8), (1, 10)];
    let cfg = tiny();
    assert_eq!(run(Driver::new(&cfg).unwrap(), &seq, 4), want);
    assert!(Driver::new(&cfg).unwrap().hierarchy().uses_lean_engine());
    let general = || Driver::with_hierarchy(Hierarchy::new_general(&cfg).unwrap());
    assert_eq!(run(general(), &seq, 4), want);
    assert_eq!(run_batch(Driver::new(&cfg).unwrap(), &seq, 4), want);
    assert_eq!(run_batch(general(), &seq, 4), want);
}

/// A software prefetch brings a line in with no row: its later use counts
/// nowhere, and the row's miss count is untouched; a line flushed and read
/// again is a new fetch.
#[test]
fn prefetched_and_flushed_lines() {
    use AccessKind::*;
    let seq = [
        (0, Prefetch, 0x4000, 1),
        (0, Read, 0x4000, 8),
        (1, Read, 0x5000, 2),
        (1, Flush, 0x5000, 1),
        (1, Read, 0x5004, 2),
    ];
    // Row 0: nothing (its read hit a prefetched line). Row 1: 0x5000
    // fetched twice, 2 bytes each time.
    assert_eq!(
        run(Driver::new(&tiny()).unwrap(), &seq, 2),
        vec![(0, 0), (2, 4)]
    );
}

/// A naive model: D1 of `sets` x `ways` LRU, each line with its mask and
/// fetching row; a straddling access references each of its lines in
/// order (Cachegrind's rule for which lines are looked up and filled).
struct Naive {
    sets: Vec<Vec<(u64, u64, u32)>>,
    ways: usize,
    out: Vec<(u64, u64)>,
}

impl Naive {
    fn touch(&mut self, line: u64, mask: u64, row: u32) {
        let n = self.sets.len() as u64;
        let set = &mut self.sets[(line % n) as usize];
        if let Some(p) = set.iter().position(|e| e.0 == line) {
            let mut e = set.remove(p);
            e.1 |= mask;
            set.insert(0, e);
        } else {
            set.insert(0, (line, mask, row));
            if set.len() > self.ways {
                let (_, m, r) = set.pop().unwrap();
                self.out[r as usize].0 += 1;
                self.out[r as usize].1 += u64::from(m.count_ones());
            }
        }
    }
    fn finish(mut self) -> Vec<(u64, u64)> {
        for s in std::mem::take(&mut self.sets) {
            for (_, m, r) in s {
                self.out[r as usize].0 += 1;
                self.out[r as usize].1 += u64::from(m.count_ones());
            }
        }
        self.out
    }
}

#[test]
fn random_traces_match_a_naive_model() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..20 {
        // 4 sets of 2 ways, over 32 lines: evictions all the time.
        let cfg = presets::cachegrind(
            Geometry::new(32 << 10, 8, 64),
            Geometry::new(512, 2, 64),
            Geometry::new(1 << 20, 16, 64),
        );
        let rows = 5;
        let mut seq = Vec::new();
        for _ in 0..2000 {
            let r = next();
            let kind = if r & 3 == 0 {
                AccessKind::Write
            } else {
                AccessKind::Read
            };
            let addr = 0x10_000 + (r >> 8) % (32 * 64);
            let size = [1, 2, 4, 8, 16][((r >> 3) % 5) as usize];
            seq.push(((r >> 40) as u32 % rows as u32, kind, addr, size));
        }
        let mut naive = Naive {
            sets: vec![Vec::new(); 4],
            ways: 2,
            out: vec![(0, 0); rows],
        };
        for &(row, _, addr, size) in &seq {
            let last = addr + u64::from(size) - 1;
            for line in addr >> 6..=last >> 6 {
                let lo = addr.max(line << 6) - (line << 6);
                let hi = last.min((line << 6) + 63) - (line << 6);
                let mask = (u64::MAX >> (63 - (hi - lo))) << lo;
                naive.touch(line, mask, row);
            }
        }
        let want = naive.finish();
        assert_eq!(
            run(Driver::new(&cfg).unwrap(), &seq, rows),
            want,
            "round {round}, lean"
        );
        let general = Driver::with_hierarchy(Hierarchy::new_general(&cfg).unwrap());
        assert_eq!(
            run_batch(general, &seq, rows),
            want,
            "round {round}, general"
        );
        assert_eq!(
            run_batch(Driver::new(&cfg).unwrap(), &seq, rows),
            want,
            "round {round}, lean batch"
        );
    }
}

/// Coherence, by hand, on the `jaguar` preset (its own engine, and the
/// general caches): core 0 reads 8 bytes of a line (row 0), core 1 reads
/// them (row 1), core 0 writes the next 8 (row 2: a hit, invalidating core
/// 1's copy), core 1 reads 8 more (row 3: a miss, a new fetch). Row 1's
/// residence ended at the invalidation with 8 bytes; at the end core 0's
/// line has 16 bytes used (row 0), core 1's new one 8 (row 3).
#[test]
fn an_invalidated_line_is_a_residence_that_ended() {
    use AccessKind::*;
    let cfg = presets::jaguar();
    for d in [
        Driver::new(&cfg).unwrap(),
        Driver::with_hierarchy(Hierarchy::new_general(&cfg).unwrap()),
    ] {
        let mut d = d.with_line_use();
        let l = d.layout();
        let (f, u) = (l.lines_fetched().unwrap(), l.bytes_used().unwrap());
        let mut table = vec![vec![0u64; l.len()]; 4];
        for (row, core, kind, addr) in [
            (0u32, 0, Read, 0x1000),
            (1, 1, Read, 0x1000),
            (2, 0, Write, 0x1008),
            (3, 1, Read, 0x1010),
        ] {
            d.set_fill_row(row);
            d.attribute(core, Access::new(kind, addr, 8), &mut table[row as usize]);
            d.drain_line_use(|r, b| {
                table[r as usize][f] += 1;
                table[r as usize][u] += b;
            });
        }
        d.finish_line_use(|r, b| {
            table[r as usize][f] += 1;
            table[r as usize][u] += b;
        });
        let got: Vec<(u64, u64)> = table.iter().map(|r| (r[f], r[u])).collect();
        assert_eq!(got, [(1, 16), (1, 8), (0, 0), (1, 8)]);
    }
}

/// More lines resident at the end than the credit queue holds (a 2 MiB
/// first level, 20,000 lines read once, 1 byte each): all credited.
#[test]
fn a_big_first_level_is_credited_whole_at_the_end() {
    let cfg = presets::cachegrind(
        Geometry::new(32 << 10, 8, 64),
        Geometry::new(2 << 20, 8, 64),
        Geometry::new(8 << 20, 16, 64),
    );
    let seq: Vec<(u32, AccessKind, u64, u32)> = (0..20_000u64)
        .map(|i| (0, AccessKind::Read, 0x100_0000 + i * 64, 1))
        .collect();
    assert_eq!(
        run(Driver::new(&cfg).unwrap(), &seq, 1),
        vec![(20_000, 20_000)]
    );
    assert_eq!(
        run_batch(Driver::new(&cfg).unwrap(), &seq, 1),
        vec![(20_000, 20_000)]
    );
}
