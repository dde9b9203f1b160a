//! Mapping of program threads to simulated cores: explicit assignments first,
//! round-robin for every other thread in the order they first appear.

/// Maps thread ids to simulated cores. Allocation happens only in
/// [`CoreMap::new`], [`CoreMap::assign`] and [`CoreMap::reserve`]; looking up a
/// known thread or assigning a new one within the reserve does not allocate.
#[derive(Clone, Debug)]
pub struct CoreMap {
    cores: usize,
    /// (thread id, core), explicit and round-robin assignments.
    map: Vec<(u64, u16)>,
    next_rr: usize,
}

impl CoreMap {
    /// A map over `cores` cores with no explicit assignment.
    pub fn new(cores: usize) -> Self {
        assert!(cores >= 1, "a core map needs at least one core");
        CoreMap {
            cores,
            map: Vec::new(),
            next_rr: 0,
        }
    }

    /// Reserves room for `threads` threads so later lookups do not allocate.
    pub fn reserve(&mut self, threads: usize) {
        self.map.reserve(threads);
    }

    /// Pins `tid` to `core`. Returns false if `core` is out of range.
    pub fn assign(&mut self, tid: u64, core: usize) -> bool {
        if core >= self.cores {
            return false;
        }
        match self.map.iter_mut().find(|(t, _)| *t == tid) {
            Some(e) => e.1 = core as u16,
            None => self.map.push((tid, core as u16)),
        }
        true
    }

    /// The core of `tid`, assigning the next core round-robin to a thread
    /// seen for the first time.
    pub fn core_of(&mut self, tid: u64) -> usize {
        if let Some(&(_, c)) = self.map.iter().find(|(t, _)| *t == tid) {
            return usize::from(c);
        }
        let c = self.next_rr % self.cores;
        self.next_rr += 1;
        self.map.push((tid, c as u16));
        c
    }

    /// The core of `tid` — its pinned core, else the next round-robin one —
    /// without remembering the thread: for callers that keep the core
    /// themselves and see unboundedly many threads (allocates nothing).
    pub fn next_core(&mut self, tid: u64) -> usize {
        if let Some(&(_, c)) = self.map.iter().find(|(t, _)| *t == tid) {
            return usize::from(c);
        }
        let c = self.next_rr % self.cores;
        self.next_rr += 1;
        c
    }

    /// Number of simulated cores threads are spread over.
    pub fn cores(&self) -> usize {
        self.cores
    }

    /// Every (thread, core) assignment so far.
    pub fn assignments(&self) -> &[(u64, u16)] {
        &self.map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_then_round_robin() {
        let mut m = CoreMap::new(4);
        assert!(m.assign(100, 3));
        assert!(!m.assign(101, 4));
        assert_eq!(m.core_of(100), 3);
        assert_eq!(m.core_of(7), 0);
        assert_eq!(m.core_of(8), 1);
        assert_eq!(m.core_of(7), 0);
        assert_eq!(m.core_of(9), 2);
        assert_eq!(m.core_of(10), 3);
        assert_eq!(m.core_of(11), 0);
    }
}
