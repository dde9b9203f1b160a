//! Hardware prefetchers: next-line, IP-stride and stream. Each observes the
//! demand accesses that reach its level and proposes lines to fetch; the
//! hierarchy fills them and keeps the issued/useful/late/wasted counts.

use crate::config::{PrefetcherConfig, PrefetcherKind};
use std::collections::TryReserveError;

/// Candidate lines proposed by one observation (at most 64, the degree limit).
pub(crate) struct Candidates {
    pub lines: [u64; 64],
    pub len: usize,
}

impl Candidates {
    pub fn new() -> Self {
        Candidates {
            lines: [0; 64],
            len: 0,
        }
    }
    fn push(&mut self, line: u64) {
        if self.len < self.lines.len() && !self.lines[..self.len].contains(&line) {
            self.lines[self.len] = line;
            self.len += 1;
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct StrideEntry {
    ip: u64,
    last: u64,
    stride: i64,
    confidence: u8,
    valid: bool,
}

#[derive(Clone, Copy, Debug, Default)]
struct StreamEntry {
    page: u64,
    last_line: u64,
    direction: i8,
    confidence: u8,
    used: u64,
    valid: bool,
}

#[derive(Clone, Debug)]
enum Engine {
    NextLine,
    IpStride(Vec<StrideEntry>),
    Stream(Vec<StreamEntry>, u64),
}

/// One prefetcher attached to one cache instance.
#[derive(Clone, Debug)]
pub(crate) struct Prefetcher {
    cfg: PrefetcherConfig,
    engine: Engine,
}

const PAGE_SHIFT: u32 = 12;

impl Prefetcher {
    /// A prefetcher with its table allocated, or the allocation error.
    pub fn try_new(cfg: PrefetcherConfig) -> Result<Prefetcher, TryReserveError> {
        fn table<T: Clone + Default>(n: u32) -> Result<Vec<T>, TryReserveError> {
            let mut v = Vec::new();
            v.try_reserve_exact(n as usize)?;
            v.resize(n as usize, T::default());
            Ok(v)
        }
        let engine = match cfg.kind {
            PrefetcherKind::NextLine { .. } => Engine::NextLine,
            PrefetcherKind::IpStride { entries, .. } => Engine::IpStride(table(entries)?),
            PrefetcherKind::Stream { streams, .. } => Engine::Stream(table(streams)?, 0),
        };
        Ok(Prefetcher { cfg, engine })
    }

    /// Bytes of table [`Prefetcher::try_new`] allocates for `cfg`.
    pub fn table_bytes(cfg: &PrefetcherConfig) -> u64 {
        match cfg.kind {
            PrefetcherKind::NextLine { .. } => 0,
            PrefetcherKind::IpStride { entries, .. } => {
                u64::from(entries) * std::mem::size_of::<StrideEntry>() as u64
            }
            PrefetcherKind::Stream { streams, .. } => {
                u64::from(streams) * std::mem::size_of::<StreamEntry>() as u64
            }
        }
    }

    /// Observes a demand access to byte `addr` (line `addr >> shift`) by the
    /// instruction at `ip`; `miss` says whether it missed at this level and
    /// `prefetched_hit` whether it hit a line this level prefetched.
    pub fn observe(
        &mut self,
        ip: u64,
        addr: u64,
        shift: u32,
        miss: bool,
        prefetched_hit: bool,
        out: &mut Candidates,
    ) {
        out.len = 0;
        let line = addr >> shift;
        let same_page =
            |cand: u64| (cand << shift) >> PAGE_SHIFT == addr >> PAGE_SHIFT || shift >= PAGE_SHIFT;
        let cross = self.cfg.cross_page;
        match (&mut self.engine, self.cfg.kind) {
            (Engine::NextLine, PrefetcherKind::NextLine { degree }) => {
                if miss {
                    for k in 1..=u64::from(degree) {
                        let c = line.wrapping_add(k);
                        if cross || same_page(c) {
                            out.push(c);
                        }
                    }
                }
            }
            (
                Engine::IpStride(table),
                PrefetcherKind::IpStride {
                    degree, distance, ..
                },
            ) => {
                if ip == 0 {
                    return;
                }
                let slot = ((ip ^ (ip >> 13)) % table.len() as u64) as usize;
                let e = &mut table[slot];
                if !e.valid || e.ip != ip {
                    *e = StrideEntry {
                        ip,
                        last: addr,
                        stride: 0,
                        confidence: 0,
                        valid: true,
                    };
                    return;
                }
                let d = addr.wrapping_sub(e.last) as i64;
                e.last = addr;
                if d == 0 {
                    return;
                }
                if d == e.stride {
                    e.confidence = (e.confidence + 1).min(3);
                } else {
                    e.stride = d;
                    e.confidence = 0;
                }
                if e.confidence >= 2 {
                    for k in 0..u64::from(degree) {
                        let target = addr
                            .wrapping_add((e.stride as u64).wrapping_mul(u64::from(distance) + k));
                        let c = target >> shift;
                        if c != line && (cross || same_page(c)) {
                            out.push(c);
                        }
                    }
                }
            }
            (
                Engine::Stream(table, clock),
                PrefetcherKind::Stream {
                    degree, distance, ..
                },
            ) => {
                if !miss && !prefetched_hit {
                    return;
                }
                *clock += 1;
                let page = addr >> PAGE_SHIFT;
                let found = table.iter().position(|e| e.valid && e.page == page);
                let i = match found {
                    Some(i) => i,
                    None => {
                        let i = table.iter().position(|e| !e.valid).unwrap_or_else(|| {
                            (0..table.len()).min_by_key(|&i| table[i].used).unwrap_or(0)
                        });
                        table[i] = StreamEntry {
                            page,
                            last_line: line,
                            direction: 0,
                            confidence: 0,
                            used: *clock,
                            valid: true,
                        };
                        return;
                    }
                };
                let e = &mut table[i];
                e.used = *clock;
                let dir: i8 = match line.cmp(&e.last_line) {
                    std::cmp::Ordering::Greater => 1,
                    std::cmp::Ordering::Less => -1,
                    std::cmp::Ordering::Equal => return,
                };
                e.last_line = line;
                if dir == e.direction {
                    e.confidence = (e.confidence + 1).min(3);
                } else {
                    e.direction = dir;
                    e.confidence = 1;
                }
                if e.confidence >= 2 {
                    for k in 0..u64::from(degree) {
                        let off = u64::from(distance) + k;
                        let c = if dir > 0 {
                            line.wrapping_add(off)
                        } else {
                            line.wrapping_sub(off)
                        };
                        if same_page(c) {
                            out.push(c);
                        }
                    }
                }
            }
            _ => unreachable!("engine built from its own config"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(kind: PrefetcherKind) -> PrefetcherConfig {
        PrefetcherConfig {
            kind,
            level: 1,
            cross_page: false,
        }
    }

    #[test]
    fn next_line_stays_in_page() {
        let mut p = Prefetcher::try_new(cfg(PrefetcherKind::NextLine { degree: 2 })).unwrap();
        let mut c = Candidates::new();
        p.observe(0, 0x1000, 6, true, false, &mut c);
        assert_eq!(&c.lines[..c.len], &[0x41, 0x42]);
        p.observe(0, 0x1FC0, 6, true, false, &mut c); // last line of the page
        assert_eq!(c.len, 0);
        p.observe(0, 0x1000, 6, false, false, &mut c); // hits do not trigger
        assert_eq!(c.len, 0);
    }

    #[test]
    fn ip_stride_learns_after_two_confirmations() {
        let kind = PrefetcherKind::IpStride {
            entries: 16,
            degree: 1,
            distance: 2,
        };
        let mut p = Prefetcher::try_new(cfg(kind)).unwrap();
        let mut c = Candidates::new();
        let mut got = Vec::new();
        for i in 0..5u64 {
            p.observe(0x400, 0x10000 + i * 256, 6, true, false, &mut c);
            got.push(c.lines[..c.len].to_vec());
        }
        // Accesses 0,1 set the stride, 2 confirms once, 3 twice: prefetch
        // addr + 2 * 256.
        assert!(got[0].is_empty() && got[1].is_empty() && got[2].is_empty());
        assert_eq!(got[3], vec![(0x10000 + 3 * 256 + 512) >> 6]);
        assert_eq!(got[4], vec![(0x10000 + 4 * 256 + 512) >> 6]);
    }

    #[test]
    fn stream_never_crosses_its_page() {
        let kind = PrefetcherKind::Stream {
            streams: 4,
            degree: 4,
            distance: 1,
        };
        let mut p = Prefetcher::try_new(cfg(kind)).unwrap();
        let mut c = Candidates::new();
        // Ascending misses near the end of page 0x5000.
        for line in [
            0x5000u64 >> 6,
            (0x5000 >> 6) + 60,
            (0x5000 >> 6) + 61,
            (0x5000 >> 6) + 62,
        ] {
            p.observe(0, line << 6, 6, true, false, &mut c);
        }
        // Confirmed at +61; at +62 only line +63 is left in the page.
        assert_eq!(&c.lines[..c.len], &[(0x5000 >> 6) + 63]);
    }
}
