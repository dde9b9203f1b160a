//! The spike detector in-process: every threshold kind and control, with
//! the exact list of spikes expected written down by hand. Zones that must
//! spike sleep 30 ms against thresholds of 20 ms; zones that must not are
//! either empty or covered by a threshold of 100 ms or more. One test per
//! process: the detector's configuration is process-global.

use coldcache_zones::{frame_mark, spike, zone, zone_describe, zone_if, zone_message};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

static FORMATTED: AtomicU32 = AtomicU32::new(0);

fn counted(s: &str) -> String {
    FORMATTED.fetch_add(1, Ordering::SeqCst);
    s.to_string()
}

fn slow() {
    std::thread::sleep(Duration::from_millis(30));
}

#[test]
fn thresholds_controls_and_lazy_messages() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("spikes.jsonl");
    // Configuration read when the recorder starts (first zone).
    std::env::set_var("COLDCACHE_SPIKE_JSON", &json);
    std::env::set_var("COLDCACHE_SPIKE_LOG", dir.path().join("spikes.txt"));
    std::env::set_var("COLDCACHE_SPIKE_ZONES", "byname=100ms");
    frame_mark();
    frame_mark();
    spike::set_global_threshold(Some(20.0));

    // 1. Global threshold: slow is the peak, outer its parent.
    {
        zone!("outer");
        zone!("slow");
        slow();
    }
    // 2. A zone's own threshold.
    {
        zone!("tick");
        spike::set_zone_threshold(100.0);
        slow();
    }
    // 3. Children threshold: read is under it, loader is over the global.
    {
        zone!("loader");
        spike::set_children_threshold(100.0);
        zone!("read");
        slow();
    }
    // 4. All parents: a and b get 100 ms, c keeps the global threshold.
    {
        zone!("a");
        zone!("b");
        zone!("c");
        spike::set_all_parents_threshold(100.0);
        slow();
    }
    // 5. Ignore a zone; ignore a zone's children.
    {
        zone!("ignored");
        spike::ignore_zone();
        slow();
    }
    {
        zone!("parent_of_ignored");
        spike::ignore_children_if(true);
        zone!("ignored_child");
        slow();
    }
    // 6. Pause.
    spike::pause();
    {
        zone!("paused");
        slow();
    }
    spike::unpause();
    // 7. A thread turned off.
    std::thread::spawn(|| {
        spike::set_thread_active(false);
        zone!("inactive_thread");
        slow();
    })
    .join()
    .unwrap();
    // 8. Messages are formatted only when over.
    {
        zone!("quick");
        zone_message!("{}", counted("never"));
    }
    {
        zone!("with_message");
        zone_describe!("level {}", 3);
        slow();
        zone_message!("{}", counted("slept"));
    }
    // 9. A threshold by name from the environment.
    {
        zone!("byname");
        slow();
    }
    // 10. Conditional zone not opened.
    {
        zone_if!(false, "conditional");
        slow();
    }

    assert_eq!(FORMATTED.load(Ordering::SeqCst), 1);
    let text = std::fs::read_to_string(&json).unwrap();
    let spikes: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let got: Vec<(String, bool, Vec<String>)> = spikes
        .iter()
        .map(|s| {
            let stack: Vec<String> = s["stack"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["name"].as_str().unwrap().to_string())
                .collect();
            (
                stack[s["depth"].as_u64().unwrap() as usize].clone(),
                s["peak"].as_bool().unwrap(),
                stack,
            )
        })
        .collect();
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let expected = vec![
        ("slow".to_string(), true, v(&["outer", "slow"])),
        ("outer".to_string(), false, v(&["outer"])),
        ("loader".to_string(), true, v(&["loader"])),
        ("c".to_string(), true, v(&["a", "b", "c"])),
        (
            "parent_of_ignored".to_string(),
            true,
            v(&["parent_of_ignored"]),
        ),
        ("with_message".to_string(), true, v(&["with_message"])),
    ];
    assert_eq!(got, expected, "{text}");
    let m = &spikes[5];
    assert_eq!(m["message"], "slept");
    assert_eq!(m["description"], "level 3");
    assert_eq!(spikes[0]["frame"], 2);
    assert!(spikes[0]["duration_ms"].as_f64().unwrap() >= 30.0);
    assert_eq!(spikes[0]["threshold_ms"].as_f64().unwrap().round(), 20.0);
    assert!(spikes[0]["stack"][1]["file"]
        .as_str()
        .unwrap()
        .ends_with("spikes.rs"));
    let log = std::fs::read_to_string(dir.path().join("spikes.txt")).unwrap();
    assert!(log.contains("PEAK CHILD @ frame 2"), "{log}");
    assert_eq!(spike::spikes_logged(), 6);
}
