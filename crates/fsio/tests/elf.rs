//! Load biases computed from the files against the dynamic loader's own:
//! `dl_iterate_phdr` reports each loaded object's `dlpi_addr`, the bias
//! the loader applied, for this very test process.

use coldcache_fsio::elf::load_bias;
use std::collections::HashMap;
use std::path::PathBuf;

unsafe extern "C" fn collect(
    info: *mut libc::dl_phdr_info,
    _size: usize,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: `data` is the `&mut Vec` passed below, alive for the call;
    // `info` is valid during the callback and `dlpi_name` is a C string.
    unsafe {
        let out = &mut *(data as *mut Vec<(String, u64)>);
        let name = std::ffi::CStr::from_ptr((*info).dlpi_name)
            .to_string_lossy()
            .into_owned();
        out.push((name, (*info).dlpi_addr));
    }
    0
}

#[test]
fn load_biases_match_the_dynamic_loader() {
    let mut objects: Vec<(String, u64)> = Vec::new();
    // SAFETY: `collect` matches the callback type and only reads `info`.
    unsafe { libc::dl_iterate_phdr(Some(collect), &mut objects as *mut _ as *mut libc::c_void) };
    let exe = std::fs::canonicalize("/proc/self/exe").unwrap();
    let truth: HashMap<PathBuf, u64> = objects
        .into_iter()
        .filter_map(|(name, bias)| {
            let p = if name.is_empty() {
                exe.clone()
            } else {
                std::fs::canonicalize(&name).ok()?
            };
            Some((p, bias))
        })
        .collect();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let mut checked = 0;
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || !f[5].starts_with('/') {
            continue;
        }
        let Ok(path) = std::fs::canonicalize(f[5]) else {
            continue;
        };
        let Some(&want) = truth.get(&path) else {
            continue;
        };
        let (start, _) = f[0].split_once('-').unwrap();
        let start = u64::from_str_radix(start, 16).unwrap();
        let offset = u64::from_str_radix(f[2], 16).unwrap();
        let data = std::fs::read(&path).unwrap();
        let got = load_bias(&data, start, offset, f[1].contains('x'));
        assert_eq!(got, Some(want), "{line}");
        checked += 1;
    }
    // The executable, libc and the loader at least, several mappings each.
    assert!(checked >= 6, "only {checked} mappings checked");
}
