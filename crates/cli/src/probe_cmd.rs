//! `coldcache probe`: measures this machine's caches by timing (the
//! `coldcache-probe` crate), prints them side by side with sysfs and CPUID,
//! and optionally writes JSON, an SVG plot, a cache configuration, and the
//! simulator's predictions for the same access patterns.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use coldcache_config::format_size;
use coldcache_probe::report::{Comparison, Report};
use coldcache_probe::Options;

#[derive(Args, Debug)]
pub struct ProbeArgs {
    /// Print the report as JSON (schema in docs/probe.md).
    #[arg(long)]
    pub json: bool,
    /// Draw latency against working-set size, detected levels marked, as SVG.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Write the measured hierarchy as a cache configuration for --cache.
    #[arg(long, value_name = "FILE")]
    pub toml: Option<PathBuf>,
    /// Run the same access patterns through this cache configuration (a
    /// preset or a TOML file) and show its predicted miss rates.
    #[arg(long, value_name = "PRESET|FILE")]
    pub simulate: Option<String>,
    /// A shorter, rougher run (under 5 seconds).
    #[arg(long)]
    pub quick: bool,
    /// Print the measurements behind each result too (latency by working
    /// set, per stride, per page count): the default is a summary.
    #[arg(long)]
    pub tables: bool,
    #[command(flatten)]
    pub progress: crate::ProgressArgs,
}

pub fn run(args: ProbeArgs) -> Result<()> {
    // Check what can be checked before spending half a minute measuring.
    let sim_cfg = args
        .simulate
        .as_deref()
        .map(|spec| coldcache_config::resolve(spec).with_context(|| format!("--simulate {spec}")))
        .transpose()?;
    for (opt, path) in [("--plot", &args.plot), ("--toml", &args.toml)] {
        if let Some(p) = path {
            if p.is_dir() {
                bail!("{opt} {}: is a directory", p.display());
            }
            let parent = p.parent().filter(|d| !d.as_os_str().is_empty());
            if let Some(d) = parent {
                if !d.is_dir() {
                    bail!("{opt} {}: no directory {}", p.display(), d.display());
                }
            }
        }
    }

    let opts = Options {
        quick: args.quick,
        ..Options::default()
    };
    let pb = args.progress.bar(1000);
    pb.set_style(
        indicatif::ProgressStyle::with_template("{spinner} probing [{bar:40}] {percent:>3}% {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let mut progress = |what: &str, frac: f64| {
        pb.set_message(what.to_string());
        pb.set_position((frac.clamp(0.0, 1.0) * 1000.0) as u64);
    };
    let mut report = coldcache_probe::run(&opts, &mut progress).context("probe")?;
    if let Some(cfg) = &sim_cfg {
        pb.set_message(format!("simulating {}", cfg.name));
        let plan = coldcache_probe::sim_plan(&report, &opts);
        report.simulation = Some(coldcache_probe::simulate::simulate(cfg, &plan)?);
    }
    pb.finish_and_clear();

    let mut config_notes = Vec::new();
    if let Some(path) = &args.toml {
        let (cfg, notes) = coldcache_probe::measured_config(&report);
        if cfg.levels.is_empty() {
            bail!(
                "--toml {}: no cache level was detected, so there is no configuration to write",
                path.display()
            );
        }
        let mut text = String::from("# Measured by `coldcache probe` on this machine.\n");
        for n in &notes {
            text.push_str(&format!("# {n}\n"));
        }
        text.push_str(&coldcache_config::to_toml(&cfg));
        // What we write must be what --cache reads back.
        let back = coldcache_config::from_toml_str(&text, path)
            .context("the measured configuration does not read back (a bug)")?;
        if back != cfg {
            bail!("the measured configuration does not round-trip (a bug)");
        }
        crate::write_output(path, text.as_bytes())?;
        config_notes = notes;
    }
    if let Some(path) = &args.plot {
        let svg = plot_svg(&report)?;
        crate::write_output(path, svg.as_bytes())?;
    }

    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        text_report(&report, args.tables, &mut out)?;
        if let Some(path) = &args.toml {
            writeln!(out, "\nWrote cache configuration {}:", path.display())?;
            for n in &config_notes {
                writeln!(out, "  {n}")?;
            }
        }
        if let Some(path) = &args.plot {
            writeln!(out, "Wrote plot {}", path.display())?;
        }
    }
    out.flush()?;
    Ok(())
}

fn size(bytes: u64) -> String {
    format_size(bytes)
}

fn opt_value(c: &Comparison, v: Option<u64>) -> String {
    match v {
        None => "-".to_string(),
        Some(v) if c.unit == "bytes" && v >= 1024 => size(v),
        Some(v) if c.unit == "bytes" => format!("{v} B"),
        Some(v) => v.to_string(),
    }
}

/// A prefetcher reach: "-" for none, "N or more" when it is the largest
/// stride tested.
fn reach_text(reach: Option<u64>, largest: Option<u64>) -> String {
    match reach {
        None => "none (not even 64 B)".to_string(),
        Some(r) if Some(r) == largest => format!("{} or more (largest tested)", size(r)),
        Some(r) => size(r),
    }
}

/// The text report: a summary (the machine, the comparison with what it
/// reports, the levels, one line per other test); with `tables`, the
/// measurements behind each.
fn text_report(r: &Report, tables: bool, out: &mut impl Write) -> Result<()> {
    let m = &r.machine;
    writeln!(
        out,
        "coldcache probe: {} ({}){}",
        if m.brand.is_empty() {
            "unknown CPU"
        } else {
            &m.brand
        },
        m.vendor,
        m.hypervisor
            .as_deref()
            .map(|h| format!(", virtual machine ({h})"))
            .unwrap_or_default()
    )?;
    writeln!(
        out,
        "  pinned to CPU {}, clock {:.2} GHz (measured{}), huge pages {} of {} (THP {}), {:.1} s{}",
        m.pinned_cpu
            .map_or_else(|| "(not pinned)".to_string(), |c| c.to_string()),
        m.clock_ghz,
        if (m.clock_ghz_start - m.clock_ghz_end).abs() > 0.03 * m.clock_ghz {
            format!(
                "; {:.2} at the start, {:.2} at the end",
                m.clock_ghz_start, m.clock_ghz_end
            )
        } else {
            String::new()
        },
        size(m.huge_page_bytes),
        size(m.buffer_bytes),
        m.thp.as_deref().unwrap_or("unavailable"),
        r.seconds,
        if r.quick { ", --quick" } else { "" }
    )?;
    // The probe itself counts for about 1.
    if let Some(load) = m.load_average.filter(|&l| l >= 1.5) {
        writeln!(
            out,
            "  note: load average {load:.1} on {} CPUs (the probe counts for 1): other work \
             shared the machine, and caches shared with it (an SMT sibling's L1 and L2, \
             the L3) may measure smaller",
            m.cpus
        )?;
    }

    writeln!(out, "\nMeasured against what the machine reports")?;
    writeln!(
        out,
        "  {:<30} {:>10} {:>10} {:>10}  verdict",
        "", "measured", "sysfs", "CPUID"
    )?;
    for c in &r.comparison {
        writeln!(
            out,
            "  {:<30} {:>10} {:>10} {:>10}  {}{}",
            c.what,
            opt_value(c, c.measured),
            opt_value(c, c.sysfs),
            opt_value(c, c.cpuid),
            c.verdict.text(),
            if c.reports_differ {
                " (sysfs and CPUID differ)"
            } else {
                ""
            }
        )?;
    }
    if let Some(e) = &r.reported.sysfs_error {
        writeln!(out, "  sysfs: {e}")?;
    }

    writeln!(
        out,
        "\nLevels (random pointer chase over growing working sets)"
    )?;
    writeln!(
        out,
        "  {:<7} {:>10} {:>14} {:>10} {:>9}  {:>16}",
        "level",
        "capacity",
        "next plateau",
        "latency",
        "cycles",
        format!("read GB/s ({})", r.machine.read_loop)
    )?;
    for l in &r.levels {
        writeln!(
            out,
            "  {:<7} {:>10} {:>14} {:>8.2}ns {:>9.1}  {:>16}",
            l.name,
            l.capacity.map_or("-".to_string(), size),
            l.next_plateau.map_or("-".to_string(), size),
            l.latency_ns,
            l.latency_cycles,
            l.read_gbps.map_or("-".to_string(), |g| format!("{g:.1}"))
        )?;
    }

    let sim = r.simulation.as_ref();
    if !tables {
        return summary_lines(r, out);
    }
    writeln!(out, "\nLatency by working set")?;
    write!(out, "  {:>10} {:>9} {:>8}", "size", "ns", "cycles")?;
    if let Some(s) = sim {
        for n in &s.levels {
            write!(out, " {:>9}", format!("{n} miss"))?;
        }
        write!(out, "   (simulated: {})", s.config)?;
    }
    writeln!(out)?;
    let knees: Vec<u64> = r.levels.iter().filter_map(|l| l.capacity).collect();
    for p in &r.sweep {
        write!(
            out,
            "  {:>10} {:>9.2} {:>8.1}",
            size(p.size),
            p.ns,
            p.cycles
        )?;
        if let Some(s) = sim {
            match s.sweep.iter().find(|q| q.size == p.size) {
                Some(q) => {
                    for m in &q.miss_rate {
                        write!(out, " {:>8.1}%", m * 100.0)?;
                    }
                }
                None => {
                    for _ in &s.levels {
                        write!(out, " {:>9}", "-")?;
                    }
                }
            }
        }
        if let Some(k) = knees.iter().position(|&k| k == p.size) {
            write!(out, "   <- L{} capacity", k + 1)?;
        }
        writeln!(out)?;
    }
    if let Some(s) = sim {
        write!(out, "  simulated capacities (miss rate above 50% beyond):")?;
        for (n, c) in s.levels.iter().zip(&s.capacity) {
            write!(out, " {n} {}", c.map_or("-".to_string(), size))?;
        }
        writeln!(
            out,
            "; simulated L1 associativity {}",
            s.assoc.map_or("-".to_string(), |a| a.to_string())
        )?;
    }

    let ls = &r.line_size;
    writeln!(
        out,
        "\nLine size: {} (ns per pair of dependent loads `stride` apart)",
        ls.detected
            .map_or("not detected".to_string(), |l| format!("{l} bytes"))
    )?;
    write!(out, " ")?;
    for (s, ns) in ls.strides.iter().zip(&ls.ns_per_pair) {
        write!(out, "  {s}: {ns:.2}")?;
    }
    writeln!(out)?;

    let a = &r.l1_assoc;
    writeln!(
        out,
        "\nL1 associativity: {} (ns per load, k lines {} apart)",
        a.detected
            .map_or("not detected".to_string(), |w| format!("{w} ways")),
        size(a.stride)
    )?;
    write!(out, " ")?;
    for (k, ns) in a.lines.iter().zip(&a.ns) {
        write!(out, " {k}:{ns:.2}")?;
    }
    writeln!(out)?;

    let t = &r.tlb;
    writeln!(
        out,
        "\nTLB reach (one load per 4 KiB page, against as many lines packed together)"
    )?;
    for lvl in &t.levels {
        writeln!(
            out,
            "  up to {} pages ({}), then +{:.2} ns per access",
            lvl.entries,
            size(lvl.reach_bytes),
            lvl.next_extra_ns
        )?;
    }
    writeln!(
        out,
        "  {:>6} {:>9} {:>9} {:>11}",
        "pages", "4 KiB", "huge", "TLB extra"
    )?;
    for (i, p) in t.pages.iter().enumerate() {
        let knee = t.levels.iter().any(|l| l.entries == *p);
        if i % 2 == 0 || i + 1 == t.pages.len() || knee {
            writeln!(
                out,
                "  {:>6} {:>7.2}ns {:>9} {:>9.2}ns",
                p,
                t.ns_4k[i],
                t.ns_huge
                    .as_ref()
                    .map_or("-".to_string(), |h| format!("{:.2}ns", h[i])),
                t.extra_ns[i]
            )?;
        }
    }

    let pf = &r.prefetch;
    writeln!(
        out,
        "\nPrefetcher reach (ascending dependent loads from memory; random: {:.1} ns)",
        pf.memory_ns
    )?;
    writeln!(
        out,
        "  at least half hidden up to stride: {}",
        prefetch_reach(pf)
    )?;
    writeln!(
        out,
        "  {:>8} {:>10} {:>12}",
        "stride", "crossing", "within page"
    )?;
    for (i, s) in pf.strides.iter().enumerate() {
        writeln!(
            out,
            "  {:>8} {:>8.2}ns {:>12}",
            size(*s),
            pf.ns_crossing[i],
            pf.ns_within_page[i].map_or("-".to_string(), |v| format!("{v:.2}ns"))
        )?;
    }

    let al = &r.aliasing;
    writeln!(
        out,
        "\n4K aliasing (store, then load 4096 bytes away vs 6144): {:.2} vs {:.2} ns per pair, {:+.1} cycles",
        al.ns_aliased, al.ns_control, al.penalty_cycles
    )?;
    Ok(())
}

/// The prefetcher's reach, crossing pages and within them.
fn prefetch_reach(pf: &coldcache_probe::report::Prefetch) -> String {
    format!(
        "crossing pages {}, within pages {}",
        reach_text(pf.reach_crossing, pf.strides.last().copied()),
        reach_text(
            pf.reach_within_page,
            pf.strides
                .iter()
                .zip(&pf.ns_within_page)
                .rev()
                .find(|(_, v)| v.is_some())
                .map(|(s, _)| *s)
        )
    )
}

/// Without `--tables`: each test's result on one line.
fn summary_lines(r: &Report, out: &mut impl Write) -> Result<()> {
    if let Some(s) = &r.simulation {
        write!(out, "\nSimulated ({}): capacities", s.config)?;
        for (n, c) in s.levels.iter().zip(&s.capacity) {
            write!(out, " {n} {}", c.map_or("-".to_string(), size))?;
        }
        writeln!(
            out,
            ", L1 associativity {}",
            s.assoc.map_or("-".to_string(), |a| a.to_string())
        )?;
    }
    let found = |what: Option<String>| what.unwrap_or_else(|| "not detected".to_string());
    writeln!(out, "\nOther tests")?;
    writeln!(
        out,
        "  line size          {}",
        found(r.line_size.detected.map(|l| format!("{l} bytes")))
    )?;
    writeln!(
        out,
        "  L1 associativity   {}",
        found(r.l1_assoc.detected.map(|w| format!("{w} ways")))
    )?;
    let tlb: Vec<String> = r
        .tlb
        .levels
        .iter()
        .map(|l| {
            format!(
                "{} pages ({}), then +{:.2} ns",
                l.entries,
                size(l.reach_bytes),
                l.next_extra_ns
            )
        })
        .collect();
    writeln!(
        out,
        "  TLB reach          {}",
        if tlb.is_empty() {
            "not detected".to_string()
        } else {
            tlb.join("; ")
        }
    )?;
    writeln!(out, "  prefetcher reach   {}", prefetch_reach(&r.prefetch))?;
    writeln!(
        out,
        "  4K aliasing        {:+.1} cycles per store-load pair",
        r.aliasing.penalty_cycles
    )?;
    writeln!(
        out,
        "\n(--tables prints the measurements behind each line; --json everything, --plot the latency curve)"
    )?;
    Ok(())
}

/// The SVG plot: latency (log) against working-set size (log), detected
/// capacities and the sizes sysfs reports marked; with a simulation, its
/// miss rates per level on a second axis.
fn plot_svg(r: &Report) -> Result<String> {
    use plotters::prelude::*;

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 620)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let sizes: Vec<f64> = r.sweep.iter().map(|p| p.size as f64).collect();
        let lats: Vec<f64> = r.sweep.iter().map(|p| p.ns).collect();
        let (xlo, xhi) = (
            sizes.first().copied().unwrap_or(1024.0),
            sizes.last().copied().unwrap_or(1e9),
        );
        // Headroom above the curve for the capacity labels.
        let ymax = lats.iter().copied().fold(1.0f64, f64::max) * 2.5;
        let ymin = lats.iter().copied().fold(f64::INFINITY, f64::min).min(1.0) * 0.7;
        let title = format!(
            "coldcache probe: {} ({:.2} GHz)",
            r.machine.brand, r.machine.clock_ghz
        );
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .right_y_label_area_size(if r.simulation.is_some() { 60 } else { 10 })
            .build_cartesian_2d((xlo..xhi).log_scale().base(2.0), (ymin..ymax).log_scale())
            .map_err(plot_err)?
            .set_secondary_coord((xlo..xhi).log_scale().base(2.0), 0.0..100.0);
        chart
            .configure_mesh()
            .x_desc("working set")
            .y_desc("latency (ns), random pointer chase")
            .x_label_formatter(&|x| size(*x as u64))
            .y_label_formatter(&|y| format!("{y:.1}"))
            .draw()
            .map_err(plot_err)?;
        if let Some(sim) = &r.simulation {
            chart
                .configure_secondary_axes()
                .y_desc(format!("simulated miss rate % ({})", sim.config))
                .draw()
                .map_err(plot_err)?;
        }

        // Sizes sysfs reports: dashed grey; detected capacities: red.
        for c in r.reported.sysfs.iter().filter(|c| c.kind != "instruction") {
            let x = c.size as f64;
            if x >= xlo && x <= xhi {
                let style = ShapeStyle::from(&RGBColor(150, 150, 150)).stroke_width(1);
                chart
                    .draw_series(DashedLineSeries::new(
                        vec![(x, ymin), (x, ymax)],
                        6,
                        4,
                        style,
                    ))
                    .map_err(plot_err)?
                    .label(format!("sysfs L{} {}", c.level, size(c.size)))
                    .legend(|(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], RGBColor(150, 150, 150))
                    });
            }
        }
        for (i, l) in r.levels.iter().enumerate() {
            if let Some(cap) = l.capacity {
                let x = cap as f64;
                chart
                    .draw_series(LineSeries::new(
                        vec![(x, ymin), (x, ymax)],
                        RED.stroke_width(2),
                    ))
                    .map_err(plot_err)?;
                chart
                    .draw_series(std::iter::once(Text::new(
                        format!("{} {}", l.name, size(cap)),
                        (x * 1.04, ymax / 1.12),
                        ("sans-serif", 15).into_font().color(&RED),
                    )))
                    .map_err(plot_err)?;
            }
            // The level's latency as a dotted horizontal line.
            let lo = if i == 0 {
                xlo
            } else {
                r.levels[i - 1].capacity.map_or(xlo, |c| c as f64)
            };
            let hi = l.capacity.map_or(xhi, |c| c as f64);
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(lo, l.latency_ns), (hi, l.latency_ns)],
                    3,
                    3,
                    ShapeStyle::from(&RED).stroke_width(1),
                ))
                .map_err(plot_err)?;
        }
        chart
            .draw_series(LineSeries::new(
                sizes.iter().copied().zip(lats.iter().copied()),
                BLUE.stroke_width(2),
            ))
            .map_err(plot_err)?
            .label("measured latency (ns)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE.stroke_width(2)));
        chart
            .draw_series(
                sizes
                    .iter()
                    .zip(&lats)
                    .map(|(&x, &y)| Circle::new((x, y), 3, BLUE.filled())),
            )
            .map_err(plot_err)?;
        chart
            .draw_series(std::iter::once(PathElement::new(vec![], RED)))
            .map_err(plot_err)?
            .label("detected capacity / level latency")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED.stroke_width(2)));

        if let Some(sim) = &r.simulation {
            let palette = [
                RGBColor(0, 150, 0),
                RGBColor(230, 140, 0),
                RGBColor(140, 0, 170),
                RGBColor(0, 160, 160),
                RGBColor(120, 80, 40),
            ];
            for (l, name) in sim.levels.iter().enumerate() {
                let color = palette[l % palette.len()];
                chart
                    .draw_secondary_series(LineSeries::new(
                        sim.sweep
                            .iter()
                            .map(|p| (p.size as f64, p.miss_rate[l] * 100.0)),
                        color.stroke_width(2),
                    ))
                    .map_err(plot_err)?
                    .label(format!("simulated {name} miss rate (%)"))
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                    });
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    Ok(svg)
}

fn plot_err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing the plot: {e}")
}
