//! Fuzz target: the input with its CRC trailer recomputed, so the section
//! decoders see the mutated contents instead of a checksum error. A dump
//! that loads must survive a round trip (`to_bytes` then `from_bytes`
//! gives the same dump).
#![no_main]

use coldcache_dump::{Dump, TRAILER};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut v = data.to_vec();
    if v.len() >= 16 + 12 {
        let body = v.len() - 12;
        let crc = crc32fast::hash(&v[..body]);
        v[body..body + 8].copy_from_slice(TRAILER);
        v[body + 8..].copy_from_slice(&crc.to_le_bytes());
    }
    if let Ok(d) = Dump::from_bytes(&v) {
        let again = Dump::from_bytes(&d.to_bytes()).expect("a dump that loaded must reload");
        assert_eq!(again, d, "round trip changed the dump");
    }
});
