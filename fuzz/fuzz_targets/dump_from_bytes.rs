//! Fuzz target: `Dump::from_bytes` on arbitrary bytes must return a value
//! or an error, never panic or allocate without bound. Random mutations
//! mostly stop at the checksum; `dump_fixed_crc` gets past it.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = coldcache_dump::Dump::from_bytes(data);
});
