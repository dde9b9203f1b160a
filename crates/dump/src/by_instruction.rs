//! A dump read for the work that looks at its records only instruction by
//! instruction — resolving it, `record`'s summary, the data types'
//! coverage — without its records in memory: one summed record per
//! instruction address, the records themselves kept as the file encodes
//! them (about 8 to 20 bytes each, against about 180 as [`Record`]s) and
//! written back unchanged, in the section and form they were read from.

use crate::{Dump, DumpError, Record, ROOT_STACK};
use std::collections::HashMap;

/// A dump whose records are summed per instruction address, with its
/// records as read kept encoded for [`to_bytes`](Self::to_bytes).
///
/// In [`dump`](Self::dump), `records` holds one record per distinct
/// address, sorted, with stack [`ROOT_STACK`], thread 0 and the sums
/// (saturating) of the counters of every record of that address: what
/// [`Dump::totals`], [`Dump::addresses`] and anything that reads records
/// per address see as in the whole dump. Everything else is the dump's
/// own. Change anything but `records` and write it with
/// [`to_bytes`](Self::to_bytes): the records written are the ones read,
/// never the sums.
#[derive(Clone, Debug)]
pub struct ByInstruction {
    /// The dump, its records summed per address.
    pub dump: Dump,
    /// Records in the file.
    records: usize,
    /// The file's bytes (for its section of records).
    bytes: Vec<u8>,
    /// Where the records' section's payload lies in `bytes`, and its form.
    recs: crate::RecordsAt,
}

impl ByInstruction {
    /// Decodes a dump as [`Dump::from_bytes`] does, checking the same
    /// (checksum, every section, every record's stack and thread), keeping
    /// `bytes` for its records.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<ByInstruction, DumpError> {
        let mut records = 0usize;
        // The sums in order of first sight, each address's place in them,
        // and the last record's place: a capture writes its records in
        // address order, so most records add to the row before them
        // without a lookup (CPython: 14.7M records, about 100,000
        // addresses).
        let mut rows: Vec<Record> = Vec::new();
        let mut place: HashMap<u64, usize> = HashMap::new();
        let mut last: Option<usize> = None;
        let (mut dump, recs) = Dump::decode(&bytes, &mut |_, r| {
            records += 1;
            let at = match last.filter(|&i| rows[i].ip == r.ip) {
                Some(i) => i,
                None => *place.entry(r.ip).or_insert_with(|| {
                    rows.push(Record {
                        ip: r.ip,
                        stack: ROOT_STACK,
                        thread: 0,
                        counters: vec![0; r.counters.len()],
                    });
                    rows.len() - 1
                }),
            };
            last = Some(at);
            for (a, b) in rows[at].counters.iter_mut().zip(r.counters) {
                *a = a.saturating_add(*b);
            }
        })?;
        rows.sort_unstable_by_key(|r| r.ip);
        dump.records = rows;
        Ok(ByInstruction {
            dump,
            records,
            bytes,
            recs,
        })
    }

    /// How many records the dump holds (not how many addresses).
    pub fn records(&self) -> usize {
        self.records
    }

    /// Encodes [`dump`](Self::dump) as [`Dump::to_bytes`] does, with the
    /// records as they were read.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.dump
            .encode(Some((self.recs.form, &self.bytes[self.recs.range.clone()])))
    }

    /// [`to_bytes`](Self::to_bytes) in parts, the records not copied.
    pub fn to_parts(&self) -> crate::EncodedParts<'_> {
        self.dump
            .encode_parts(Some((self.recs.form, &self.bytes[self.recs.range.clone()])))
    }
}
