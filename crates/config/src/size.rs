//! The TOML side of byte sizes: [`Size`], a size read from a TOML integer
//! or a string such as `"48K"` (the parsing itself is
//! `coldcache_config_slim::parse_size`).

use std::fmt;

use coldcache_config_slim::{parse_size, SIZE_UNITS};

/// A byte size read from a TOML integer or a string such as `"48K"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Size(pub u64);

impl<'de> serde::Deserialize<'de> for Size {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Size;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "a size: {SIZE_UNITS}")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Size, E> {
                Ok(Size(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Size, E> {
                u64::try_from(v).map(Size).map_err(|_| {
                    E::custom(format!("{v} is not a size (a size cannot be negative)"))
                })
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Size, E> {
                Err(E::custom(format!(
                    "{v} is not a size (write fractions as a string with a unit, e.g. \"1.25MiB\")"
                )))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Size, E> {
                parse_size(v).map(Size).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}
