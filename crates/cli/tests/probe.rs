//! `coldcache probe` end to end: one `--quick` run writes JSON, an SVG plot
//! and a cache configuration, simulates a small configuration, and the
//! configuration is then used by `coldcache sim --cache`. Bad arguments are
//! refused before anything is measured. Timings are machine-dependent, so
//! only the shape of the output is checked (and the line size, which is a
//! power of two whenever it is detected); the measured figures are in
//! docs/probe.md.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_coldcache"))
}

fn dir(name: &str) -> PathBuf {
    let d =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("probe-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run coldcache")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn quick_probe_writes_json_plot_and_a_configuration_sim_accepts() {
    let d = dir("quick");
    let toml = d.join("measured.toml");
    let svg = d.join("latency.svg");
    let small = repo("examples/caches/small-2level.toml");
    let out = run(&[
        "probe",
        "--quick",
        "--json",
        "--no-progress",
        "--toml",
        toml.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
        "--simulate",
        small.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "probe failed: {}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");

    assert_eq!(v["version"], 1);
    assert_eq!(v["quick"], true);
    // A clock an x86-64 core can run at (none ships above 6.2 GHz): a
    // Sapphire Rapids Xeon "measured" 17.6 GHz when the renamer folded the
    // timed chain of `add reg, 1`.
    let ghz = v["machine"]["clock_ghz"].as_f64().unwrap();
    assert!((0.5..6.5).contains(&ghz), "clock {ghz} GHz");
    assert!(v["machine"]["vendor"].is_string());
    let sweep = v["sweep"].as_array().unwrap();
    assert!(sweep.len() > 20);
    for p in sweep {
        assert!(p["size"].as_u64().unwrap() >= 4096);
        assert!(p["ns"].as_f64().unwrap() > 0.0);
        assert!(p["cycles"].as_f64().unwrap() > 0.0);
    }
    let levels = v["levels"].as_array().unwrap();
    assert!(!levels.is_empty());
    assert_eq!(levels.last().unwrap()["name"], "memory");
    assert!(levels.last().unwrap()["capacity"].is_null());
    for l in levels {
        assert!(l["latency_ns"].as_f64().unwrap() > 0.0);
        assert!(l["read_gbps"].as_f64().unwrap() > 0.0);
    }
    if let Some(line) = v["line_size"]["detected"].as_u64() {
        assert!(
            line.is_power_of_two() && (16..=256).contains(&line),
            "{line}"
        );
    }
    assert_eq!(
        v["line_size"]["strides"].as_array().unwrap().len(),
        v["line_size"]["ns_per_pair"].as_array().unwrap().len()
    );
    assert_eq!(
        v["l1_assoc"]["lines"].as_array().unwrap().len(),
        v["l1_assoc"]["ns"].as_array().unwrap().len()
    );
    assert_eq!(
        v["tlb"]["pages"].as_array().unwrap().len(),
        v["tlb"]["ns_4k"].as_array().unwrap().len()
    );
    assert!(v["prefetch"]["ns_crossing"].is_array());
    assert!(v["aliasing"]["ns_aliased"].as_f64().unwrap() > 0.0);
    let rows = v["comparison"].as_array().unwrap();
    assert!(rows.iter().any(|r| r["what"] == "line size"));
    for r in rows {
        let verdict = r["verdict"].as_str().unwrap();
        assert!(
            [
                "agrees",
                "close",
                "disagrees",
                "not_measured",
                "not_reported"
            ]
            .contains(&verdict),
            "{verdict}"
        );
    }
    assert!(v["reported"]["cpuid"]["vendor"].is_string());

    // The simulation of the same patterns on a 4 KiB L1d, 64 KiB L2.
    let sim = &v["simulation"];
    assert_eq!(sim["config"], "small-2level");
    assert_eq!(sim["levels"], serde_json::json!(["L1d", "L2"]));
    let pts = sim["sweep"].as_array().unwrap();
    let at = |size: u64| {
        pts.iter()
            .find(|p| p["size"] == size)
            .map(|p| p["miss_rate"].clone())
            .unwrap()
    };
    // Independent truth: an LRU cache under a cyclic pattern of distinct
    // lines hits everything that fits and misses everything else (the L1d);
    // the L2 (tree-PLRU) holds what fits. The patterns step by the measured
    // line size; when a noisy quick run measures less than the
    // configuration's 64 bytes, a line is visited more than once per cycle
    // and only the bounds hold.
    let stride = v["line_size"]["detected"].as_u64().unwrap_or(64);
    assert_eq!(at(4096), serde_json::json!([0.0, 0.0]));
    assert_eq!(at(64 << 10)[1], 0.0);
    assert!(at(128 << 10)[0].as_f64().unwrap() > 0.5);
    assert!(at(128 << 10)[1].as_f64().unwrap() > 0.5);
    if stride >= 64 {
        assert_eq!(at(8192), serde_json::json!([1.0, 0.0]));
        assert_eq!(at(64 << 10), serde_json::json!([1.0, 0.0]));
        assert_eq!(at(128 << 10)[0], 1.0);
        assert_eq!(sim["capacity"][0], 4096);
    } else {
        // Two or more visits per line: the second may hit, so the L1d's
        // apparent capacity lies between 4 KiB and four times that (at
        // 16 KiB at most a quarter of the lines can be held).
        assert!(at(8192)[0].as_f64().unwrap() > 0.0, "stride {stride}");
        let cap = sim["capacity"][0].as_u64().unwrap();
        assert!((4096..16384).contains(&cap), "stride {stride}: {cap}");
    }
    assert_eq!(sim["assoc"], 4);

    let svg_text = std::fs::read_to_string(&svg).unwrap();
    assert!(svg_text.starts_with("<svg"), "{}", &svg_text[..80]);
    assert!(svg_text.contains("measured latency"));

    // The configuration: read back by the config crate, and accepted by sim.
    let cfg = coldcache_config::resolve(toml.to_str().unwrap()).expect("valid configuration");
    assert_eq!(cfg.name, "probe");
    assert_eq!(cfg.cores, 1);
    let trace = repo("examples/traces/example.lackey.gz");
    let out = run(&[
        "sim",
        "--cache",
        toml.to_str().unwrap(),
        "--json",
        "--no-progress",
        trace.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "sim failed: {}", stderr(&out));
    let s: Value = serde_json::from_slice(&out.stdout).expect("sim JSON");
    assert!(s.is_object());
    // No temporary files left beside the outputs.
    let names: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
}

#[test]
fn bad_arguments_are_refused_before_measuring() {
    let out = run(&["probe", "--simulate", "nosuchpreset", "--no-progress"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--simulate nosuchpreset"),
        "{}",
        stderr(&out)
    );

    let out = run(&["probe", "--simulate", "/no/such/file.toml", "--no-progress"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("/no/such/file.toml"),
        "{}",
        stderr(&out)
    );

    let out = run(&["probe", "--toml", "/no/such/dir/x.toml", "--no-progress"]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(
        e.contains("--toml /no/such/dir/x.toml") && e.contains("no directory"),
        "{e}"
    );

    let d = dir("isdir");
    let out = run(&["probe", "--plot", d.to_str().unwrap(), "--no-progress"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("is a directory"), "{}", stderr(&out));
}

/// The text report is a summary (it was 133 lines with `--quick`): the
/// comparison, the levels and one line per other test; `--tables` adds the
/// measurements behind them.
#[test]
fn the_text_report_is_a_summary_and_tables_add_the_measurements() {
    let out = run(&["probe", "--quick", "--no-progress"]);
    assert!(out.status.success(), "probe failed: {}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().count() <= 40, "{text}");
    for part in [
        "Measured against what the machine reports",
        "Levels",
        "line size",
        "TLB reach",
        "4K aliasing",
        "--tables",
    ] {
        assert!(text.contains(part), "{part}: {text}");
    }
    assert!(!text.contains("Latency by working set"), "{text}");
    let out = run(&["probe", "--quick", "--no-progress", "--tables"]);
    assert!(out.status.success(), "probe failed: {}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Latency by working set"), "{text}");
    assert!(text.lines().count() > 60, "{text}");
}
