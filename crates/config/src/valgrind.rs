//! Valgrind-style cache geometry options: `--I1=SIZE,ASSOC,LINE`,
//! `--D1=...`, `--LL=...`, spelled exactly as `valgrind --tool=cachegrind`
//! takes them (SIZE in bytes; a unit such as `32K` is also accepted), and
//! their application to a configuration.
//!
//! Cachegrind itself additionally insists that the number of sets be a power
//! of two; the simulator does not (it indexes other set counts by modulo), so
//! neither does this module.

use coldcache_sim::presets::Geometry;
use coldcache_sim::{CacheKind, HierarchyConfig};

use crate::parse_size;

/// A geometry string that is not `SIZE,ASSOC,LINE`, or not a cache.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} {problem}")]
pub struct GeometryError {
    /// The value as given, e.g. `"32768,8"`.
    pub text: String,
    /// E.g. "needs three values SIZE,ASSOC,LINE".
    pub problem: String,
}

/// A bad `--I1`, `--D1` or `--LL` option: the option, then the problem, e.g.
/// `--D1: "32768,8" needs three values SIZE,ASSOC,LINE`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{option}: {problem}")]
pub struct OptionError {
    /// The option as spelt on the command line: `--I1`, `--D1` or `--LL`.
    pub option: String,
    /// What is wrong with its value.
    pub problem: String,
}

/// Parses `SIZE,ASSOC,LINE` (`"32768,8,64"`). SIZE is in bytes, or a size
/// with a unit (`"32K"`); ASSOC at least 1; LINE a power of two; SIZE a
/// whole number of sets of ASSOC lines of LINE bytes.
pub fn parse_valgrind_geometry(text: &str) -> Result<Geometry, GeometryError> {
    let fail = |problem: String| GeometryError {
        text: text.to_string(),
        problem,
    };
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    let [size, assoc, line] = parts.as_slice() else {
        return Err(fail("needs three values SIZE,ASSOC,LINE".into()));
    };
    let size = parse_size(size).map_err(|e| fail(format!("has a bad SIZE: {e}")))?;
    let assoc: u32 = assoc
        .parse()
        .map_err(|_| fail(format!("has a bad ASSOC: {assoc:?} is not a whole number")))?;
    let line: u32 = line
        .parse()
        .map_err(|_| fail(format!("has a bad LINE: {line:?} is not a whole number")))?;
    let g = Geometry::new(size, assoc, line);
    check_geometry(&g).map_err(fail)?;
    Ok(g)
}

/// The checks the simulator will make, worded for a geometry option.
fn check_geometry(g: &Geometry) -> Result<(), String> {
    if g.assoc == 0 {
        return Err("has ASSOC 0; a cache needs at least one way".into());
    }
    if g.line == 0 || !g.line.is_power_of_two() {
        return Err(format!("has LINE {}, which is not a power of two", g.line));
    }
    let set = u64::from(g.assoc) * u64::from(g.line);
    if g.size == 0 || !g.size.is_multiple_of(set) {
        return Err(format!(
            "has SIZE {} bytes, which is not a whole number of sets of {} ways x {} bytes",
            g.size, g.assoc, g.line
        ));
    }
    if g.size / set > (1 << 32) {
        return Err("has more than 2^32 sets".into());
    }
    Ok(())
}

/// [`parse_valgrind_geometry`] with the error naming the option, e.g.
/// `parse_valgrind_option("--D1", "32768,8")` fails with
/// `--D1: "32768,8" needs three values SIZE,ASSOC,LINE`.
pub fn parse_valgrind_option(option: &str, text: &str) -> Result<Geometry, OptionError> {
    parse_valgrind_geometry(text).map_err(|e| OptionError {
        option: option.to_string(),
        problem: e.to_string(),
    })
}

/// Replaces the geometry (size, associativity, line size) of the I1, D1 and
/// LL levels, as Cachegrind's `--I1`, `--D1` and `--LL` do: I1 is the level-1
/// instruction cache, D1 the level-1 data cache, LL the unified cache of the
/// highest level number (at least 2). Everything else about the levels
/// (policy, sharing, ...) is kept. Fails, changing nothing, if a given
/// option's level does not exist, a geometry is not a cache, or the result
/// does not validate.
pub fn apply_cachegrind_overrides(
    cfg: &mut HierarchyConfig,
    i1: Option<Geometry>,
    d1: Option<Geometry>,
    ll: Option<Geometry>,
) -> Result<(), OptionError> {
    let oerr = |option: &str, problem: String| OptionError {
        option: option.to_string(),
        problem,
    };
    let last = cfg.levels.iter().map(|l| l.level).max().unwrap_or(0);
    let mut new = cfg.clone();
    let mut touched = Vec::new();
    for (option, geometry, what) in [("--I1", i1, "I1"), ("--D1", d1, "D1"), ("--LL", ll, "LL")] {
        let Some(g) = geometry else { continue };
        check_geometry(&g)
            .map_err(|p| oerr(option, format!("\"{},{},{}\" {p}", g.size, g.assoc, g.line)))?;
        let index = match what {
            "I1" => new
                .levels
                .iter()
                .position(|l| l.level == 1 && l.kind == CacheKind::Instruction),
            "D1" => new
                .levels
                .iter()
                .position(|l| l.level == 1 && l.kind == CacheKind::Data),
            _ => new
                .levels
                .iter()
                .position(|l| last >= 2 && l.level == last && l.kind == CacheKind::Unified),
        };
        let Some(index) = index else {
            let has = match what {
                "I1" => "level-1 instruction cache",
                "D1" => "level-1 data cache",
                _ => "unified last level below level 1",
            };
            return Err(oerr(
                option,
                format!("configuration {:?} has no {has} to resize", cfg.name),
            ));
        };
        let l = &mut new.levels[index];
        l.size = g.size;
        l.assoc = g.assoc;
        l.line_size = g.line;
        touched.push((index, option));
    }
    new.validate().map_err(|e| {
        // Blame the option whose level the key names, else the last one given.
        let option = touched
            .iter()
            .find(|(i, _)| e.key.starts_with(&format!("levels[{i}]")))
            .or(touched.last())
            .map_or("--LL", |(_, o)| o);
        oerr(
            option,
            format!("the resulting configuration is invalid: {e}"),
        )
    })?;
    *cfg = new;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use coldcache_sim::presets;

    #[test]
    fn parses_valgrind_spelling() {
        assert_eq!(
            parse_valgrind_geometry("32768,8,64"),
            Ok(Geometry::new(32768, 8, 64))
        );
        assert_eq!(
            parse_valgrind_geometry("8388608,16,64"),
            Ok(Geometry::new(8 << 20, 16, 64))
        );
        assert_eq!(
            parse_valgrind_geometry("32K, 8, 64"),
            Ok(Geometry::new(32768, 8, 64))
        );
        // Cache Lab-sized toys are fine: 1-byte lines, 3 sets.
        assert_eq!(parse_valgrind_geometry("3,1,1"), Ok(Geometry::new(3, 1, 1)));
    }

    #[test]
    fn geometry_errors() {
        let cases: &[(&str, &str)] = &[
            ("32768,8", "\"32768,8\" needs three values SIZE,ASSOC,LINE"),
            ("32768,8,64,1", "needs three values"),
            ("", "needs three values"),
            ("32Q,8,64", "has a bad SIZE: \"32Q\" is not a size"),
            ("32768,x,64", "has a bad ASSOC: \"x\" is not a whole number"),
            (
                "32768,8,-64",
                "has a bad LINE: \"-64\" is not a whole number",
            ),
            ("32768,0,64", "ASSOC 0"),
            ("32768,8,48", "LINE 48, which is not a power of two"),
            ("32768,8,0", "LINE 0"),
            (
                "30000,8,64",
                "SIZE 30000 bytes, which is not a whole number of sets of 8 ways x 64 bytes",
            ),
            ("0,8,64", "SIZE 0 bytes"),
        ];
        for &(text, want) in cases {
            let e = parse_valgrind_geometry(text).expect_err(text).to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
        assert_eq!(
            parse_valgrind_option("--D1", "32768,8")
                .unwrap_err()
                .to_string(),
            "--D1: \"32768,8\" needs three values SIZE,ASSOC,LINE"
        );
    }

    #[test]
    fn overrides_replace_geometry_only() {
        let mut c = presets::cachegrind_default();
        apply_cachegrind_overrides(
            &mut c,
            Some(Geometry::new(65536, 4, 64)),
            Some(Geometry::new(16384, 2, 32)),
            Some(Geometry::new(12 << 20, 24, 128)),
        )
        .unwrap();
        let want = presets::cachegrind(
            Geometry::new(65536, 4, 64),
            Geometry::new(16384, 2, 32),
            Geometry::new(12 << 20, 24, 128),
        );
        assert_eq!(c, want);
        // None leaves a level alone.
        let mut d = presets::cachegrind_default();
        apply_cachegrind_overrides(&mut d, None, Some(Geometry::new(65536, 16, 64)), None).unwrap();
        let mut want = presets::cachegrind_default();
        want.levels[1].size = 65536;
        want.levels[1].assoc = 16;
        assert_eq!(d, want);
    }

    #[test]
    fn overrides_on_other_presets() {
        // LL is the highest unified level: L3 on Zen 4, L2 on Jaguar.
        let mut z = presets::zen4();
        apply_cachegrind_overrides(&mut z, None, None, Some(Geometry::new(16 << 20, 16, 64)))
            .unwrap();
        assert_eq!(
            z.levels.iter().find(|l| l.name == "L3").unwrap().size,
            16 << 20
        );
        let mut j = presets::jaguar();
        apply_cachegrind_overrides(&mut j, None, None, Some(Geometry::new(1 << 20, 16, 64)))
            .unwrap();
        assert_eq!(
            j.levels.iter().find(|l| l.level == 2).unwrap().size,
            1 << 20
        );
    }

    #[test]
    fn override_errors() {
        let mut one = presets::cachegrind_default();
        one.levels.retain(|l| l.level == 1);
        let before = one.clone();
        let e =
            apply_cachegrind_overrides(&mut one, None, None, Some(Geometry::new(1 << 20, 16, 64)))
                .unwrap_err();
        assert_eq!(e.option, "--LL");
        assert_eq!(
            e.to_string(),
            "--LL: configuration \"cachegrind\" has no unified last level below level 1 to resize"
        );
        assert_eq!(one, before, "unchanged on error");

        let mut unified = presets::cachegrind_default();
        unified.levels.retain(|l| l.level == 2);
        unified.levels[0].level = 1;
        let e =
            apply_cachegrind_overrides(&mut unified, Some(Geometry::new(32768, 8, 64)), None, None)
                .unwrap_err();
        assert_eq!(
            e.to_string(),
            "--I1: configuration \"cachegrind\" has no level-1 instruction cache to resize"
        );

        let mut c = presets::cachegrind_default();
        let e = apply_cachegrind_overrides(&mut c, None, Some(Geometry::new(30000, 8, 64)), None)
            .unwrap_err();
        assert_eq!(e.option, "--D1");
        assert!(e.problem.contains("not a whole number of sets"), "{e}");

        // Valid geometry, invalid result: tree-PLRU with more than 64 ways.
        let mut z = presets::zen4();
        let e =
            apply_cachegrind_overrides(&mut z, None, Some(Geometry::new(128 * 64, 128, 64)), None)
                .unwrap_err();
        assert_eq!(e.option, "--D1");
        assert!(e.problem.contains("tree-PLRU"), "{e}");
        assert_eq!(z, presets::zen4());
    }
}
