//! Global and static variables by address: every `DW_TAG_variable` whose
//! location is a fixed address (`DW_OP_addr`, `DW_OP_addrx`), at any
//! nesting (file scope, namespaces, function statics, class statics
//! defined through `DW_AT_specification`), by the file address range
//! `[addr, addr + sizeof)` it occupies.

use crate::layout::Layouts;
use crate::{Reader, TypeRef};
use gimli::AttributeValue;

/// One global or static variable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Global {
    /// Its name (`table`; a class static's is its class's member name).
    pub name: String,
    /// File (ELF virtual) address.
    pub addr: u64,
    /// `sizeof`, in bytes.
    pub size: u64,
    /// Its type as declared (arrays, typedefs and all).
    pub ty: TypeRef,
}

/// The global and static variables of a module, by address.
#[derive(Clone, Debug, Default)]
pub struct Globals {
    /// Sorted by address; where two overlap, the larger first.
    vars: Vec<Global>,
}

impl Globals {
    /// The variables with a fixed address `layouts` found (reading
    /// `.debug_info` it read them in the same pass), with their names,
    /// types and sizes. Variables whose type or size cannot be read are
    /// left out.
    pub fn read(layouts: &Layouts) -> Globals {
        let mut vars: Vec<Global> = layouts
            .fixed_variables()
            .iter()
            .filter_map(|&(here, addr)| global(layouts, here, addr))
            .collect();
        vars.sort_by(|a, b| a.addr.cmp(&b.addr).then(b.size.cmp(&a.size)));
        vars.dedup_by(|b, a| a.addr == b.addr);
        Globals { vars }
    }

    /// Keeps the variables that lie in memory the program has (`loaded`:
    /// the file's allocated sections, `[start, end)`): not, say, the
    /// link-time warnings of `.gnu.warning` sections at address 0.
    pub fn retain_loaded(&mut self, loaded: &[(u64, u64)]) {
        self.vars.retain(|g| {
            loaded
                .iter()
                .any(|&(s, e)| s <= g.addr && g.addr.saturating_add(g.size) <= e)
        });
    }

    /// Every variable, by address.
    pub fn all(&self) -> &[Global] {
        &self.vars
    }

    /// The variable whose bytes hold file address `addr`.
    pub fn find(&self, addr: u64) -> Option<&Global> {
        let i = self.vars.partition_point(|g| g.addr <= addr);
        // The nearest variables starting at or before `addr`; a small one
        // may sit after a larger one that does not reach `addr`.
        self.vars[..i]
            .iter()
            .rev()
            .take(4)
            .find(|g| addr < g.addr.saturating_add(g.size))
    }
}

/// The variable at entry `here`, at `addr`: its name and type, from the
/// declaration it defines when not its own.
fn global(layouts: &Layouts, here: TypeRef, addr: u64) -> Option<Global> {
    let mut name = layouts.name(here);
    let mut ty = layouts.type_of(here);
    let mut origin = here;
    for _ in 0..4 {
        if name.is_some() && ty.is_some() {
            break;
        }
        let next = [gimli::DW_AT_specification, gimli::DW_AT_abstract_origin]
            .into_iter()
            .find_map(|at| match e_attr(layouts, origin, at) {
                Some(AttributeValue::UnitRef(o)) => layouts
                    .locate(origin)
                    .and_then(|(u, _)| o.to_debug_info_offset(&u.header)),
                Some(AttributeValue::DebugInfoRef(o)) => Some(o),
                _ => None,
            });
        let n = next?;
        origin = n;
        name = name.or_else(|| layouts.name(n));
        ty = ty.or_else(|| layouts.type_of(n));
    }
    let (ty, name) = (ty?, name?);
    let size = layouts.size_of(ty).filter(|&s| s > 0)?;
    Some(Global {
        name,
        addr,
        size,
        ty,
    })
}

/// An attribute of the entry at `r`.
fn e_attr(layouts: &Layouts, r: TypeRef, at: gimli::DwAt) -> Option<AttributeValue<Reader>> {
    let (unit, off) = layouts.locate(r)?;
    unit.entry(off).ok()?.attr_value(at).ok()?
}
