//! gzip and zstd inputs read exactly like the plain input, whatever the
//! format inside, from memory and from files (with progress counters).

mod common;

use std::io::Write;
use std::process::Command;

use coldcache_trace::{open, Format, Record, TraceWriter};

fn records_of(name: &str, data: Vec<u8>) -> (Vec<Record>, Format, Option<&'static str>) {
    let mut r = common::reader(name, data, None).unwrap();
    let records = common::read_all(&mut r, 4096).unwrap();
    (records, r.format(), r.compression())
}

#[test]
fn lackey_gzip_and_zstd_read_identically() {
    let text = common::synthetic_lackey(200_000);
    let (plain, f, c) = records_of("t", text.clone().into_bytes());
    assert_eq!((f, c), (Format::Lackey, None));
    assert_eq!(plain.len(), 200_000);
    let (gz, f, c) = records_of("t.gz", common::gzip(text.as_bytes()));
    assert_eq!((f, c), (Format::Lackey, Some("gzip")));
    assert_eq!(gz, plain);
    let (zst, f, c) = records_of("t.zst", common::zstd(text.as_bytes()));
    assert_eq!((f, c), (Format::Lackey, Some("zstd")));
    assert_eq!(zst, plain);
}

#[test]
fn din_and_cctrace_compressed() {
    let din = "2 400\n0 1000\n1 2000 8\n4 0\n".repeat(1000);
    let (plain, f, _) = records_of("t.din", din.clone().into_bytes());
    assert_eq!(f, Format::Dinero);
    assert_eq!(
        records_of("t.din.gz", common::gzip(din.as_bytes())).0,
        plain
    );
    assert_eq!(
        records_of("t.din.zst", common::zstd(din.as_bytes())).0,
        plain
    );

    let mut w = TraceWriter::new(Vec::new()).unwrap();
    w.write_all(&plain).unwrap();
    let bin = w.finish().unwrap();
    let (b, f, _) = records_of("t.cctrace.zst", common::zstd(&bin));
    assert_eq!((b, f), (plain.clone(), Format::Binary));
    let (b, f, _) = records_of("t.cctrace.gz", common::gzip(&bin));
    assert_eq!((b, f), (plain, Format::Binary));
}

#[test]
fn multi_member_gzip() {
    let a = common::synthetic_lackey(1000);
    let b = " L 10,4\n S 20,8\n";
    let mut both = common::gzip(a.as_bytes());
    both.extend_from_slice(&common::gzip(b.as_bytes()));
    let (records, _, _) = records_of("t.gz", both);
    assert_eq!(records.len(), 1002);
    assert_eq!(records[1001].addr, 0x20);
}

#[test]
fn files_report_progress_in_compressed_bytes() {
    let text = common::synthetic_lackey(100_000);
    for (ext, data) in [
        ("plain", text.clone().into_bytes()),
        ("gz", common::gzip(text.as_bytes())),
        ("zst", common::zstd(text.as_bytes())),
    ] {
        let path = common::temp_path(&format!("progress.{ext}"));
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&data)
            .unwrap();
        let mut r = open(&path, None).unwrap();
        assert_eq!(r.total_bytes(), Some(data.len() as u64));
        let mut buf = Vec::new();
        let mut last = 0;
        let mut n = 0;
        loop {
            let got = r.read_batch(&mut buf, 1000).unwrap();
            if got == 0 {
                break;
            }
            n += got;
            let now = r.bytes_read();
            assert!(now >= last && now <= data.len() as u64);
            last = now;
        }
        assert_eq!(n, 100_000);
        assert_eq!(r.bytes_read(), data.len() as u64, "{ext}");
        std::fs::remove_file(&path).unwrap();
    }
}

/// Files made by the real `gzip` and `zstd` tools, when installed.
#[test]
fn files_from_the_command_line_tools() {
    let text = common::synthetic_lackey(50_000);
    let plain_path = common::temp_path("cli.trace");
    std::fs::write(&plain_path, &text).unwrap();
    let plain = common::read_all(&mut open(&plain_path, None).unwrap(), 4096).unwrap();
    for (tool, args, ext) in [
        ("gzip", &["-k", "-f"][..], "gz"),
        ("zstd", &["-q", "-f", "-k"][..], "zst"),
    ] {
        let ok = Command::new(tool)
            .args(args)
            .arg(&plain_path)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            eprintln!("NOTE: {tool} not available; skipped");
            continue;
        }
        let packed = plain_path.with_extension(format!("trace.{ext}"));
        let records = common::read_all(&mut open(&packed, None).unwrap(), 4096).unwrap();
        assert_eq!(records, plain, "{tool}");
        std::fs::remove_file(&packed).unwrap();
    }
    std::fs::remove_file(&plain_path).unwrap();
}
