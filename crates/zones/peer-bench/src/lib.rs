//! Nothing: this package holds `benches/zone_cost.rs` (see Cargo.toml).
