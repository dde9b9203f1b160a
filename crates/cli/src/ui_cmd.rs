//! `coldcache ui DUMP [DUMP2]`: serve the web UI (crate `coldcache-ui`) on
//! 127.0.0.1 until Ctrl-C (SIGINT and SIGTERM set a flag the server polls).

use crate::report_cmd::load_for_views;
use anyhow::{bail, Result};
use clap::Args;
use coldcache_analysis::{Profile, ProfileOptions};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// `coldcache ui`.
#[derive(Args, Debug)]
pub struct UiArgs {
    /// The dump to show (with a second one: compare them, first = before).
    #[arg(required = true, num_args = 1..=2)]
    dumps: Vec<PathBuf>,
    /// Port on 127.0.0.1 (default: a free one).
    #[arg(long)]
    port: Option<u16>,
    /// Open the page in the default browser (xdg-open).
    #[arg(long)]
    open: bool,
    /// Count inlined code to the function it was inlined into.
    #[arg(long)]
    no_inline: bool,
    /// For `--function` captures: keep the whole stack above the captured
    /// function instead of rooting the trees at it.
    #[arg(long)]
    whole_stack: bool,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    // Async-signal-safe: one atomic store.
    STOP.store(true, Ordering::SeqCst);
}

/// Runs `coldcache ui`.
pub fn run(a: UiArgs) -> Result<()> {
    let mut profiles = Vec::new();
    for path in &a.dumps {
        let dump = load_for_views(path)?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        let root = crate::report_cmd::window_root(&dump, a.whole_stack);
        profiles.push((
            name,
            Profile::new(
                dump,
                ProfileOptions {
                    inline: !a.no_inline,
                    threads: None,
                    root,
                },
            ),
        ));
    }
    // The disassembly shows objdump's addresses, as `report --asm` does:
    // the load biases come from the modules' files, read here.
    let load_biases = profiles
        .iter()
        .map(|(_, p)| crate::report_cmd::load_biases(p.dump()))
        .collect();
    let server = match coldcache_ui::Server::bind(
        profiles,
        &coldcache_ui::ServeOptions {
            port: a.port,
            load_biases,
            ..Default::default()
        },
    ) {
        Ok(s) => s,
        Err(e) => bail!(e),
    };
    // SAFETY: installs a handler that only stores to an atomic; the
    // sigaction struct is fully initialised.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigint as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
    }
    server.warm_in_background();
    println!("coldcache ui: {}", server.url);
    println!("(Ctrl-C stops the server)");
    use std::io::Write;
    let _ = std::io::stdout().flush();
    if a.open {
        if let Err(e) = std::process::Command::new("xdg-open")
            .arg(&server.url)
            .spawn()
        {
            coldcache_fsio::say!(
                "coldcache: warning: cannot open a browser (xdg-open: {e}); open the URL above"
            );
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    std::thread::spawn(move || loop {
        if STOP.load(Ordering::SeqCst) {
            flag.store(true, Ordering::SeqCst);
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    });
    server.run(&stop);
    println!("coldcache ui: stopped");
    Ok(())
}
