//! Knee detection on sweeps measured on a real machine (a KVM guest whose
//! sysfs is the independent truth), kept in tests/data: the detection must
//! find the L1d size exactly and the L2 size within a factor of 1.5 on
//! every run, and three cache levels. No timing happens here.

use coldcache_probe::detect::{knees, plateaus, Params};

#[test]
fn kvm_epyc_sweeps_give_the_sysfs_l1_and_l2() {
    let text = include_str!("data/kvm-epyc-sweeps.json");
    let v: serde_json::Value = serde_json::from_str(text).unwrap();
    let runs = v["runs"].as_array().unwrap();
    assert!(runs.len() >= 5);
    for (n, run) in runs.iter().enumerate() {
        let points: Vec<(u64, f64)> = run
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p[0].as_u64().unwrap(), p[1].as_f64().unwrap()))
            .collect();
        let values: Vec<f64> = points.iter().map(|p| p.1).collect();
        let ps = plateaus(&values, &Params::default());
        let caps: Vec<u64> = knees(&values, &ps)
            .into_iter()
            .map(|i| points[i].0)
            .collect();
        assert_eq!(caps.len(), 3, "run {n}: {caps:?}");
        assert_eq!(caps[0], 32 << 10, "run {n}: {caps:?}");
        let l2 = caps[1] as f64 / (1 << 20) as f64;
        assert!((1.0 / 1.5..=1.5).contains(&l2), "run {n}: {caps:?}");
    }
}
