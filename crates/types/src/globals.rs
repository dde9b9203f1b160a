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
    /// Reads every variable with a fixed address from `layouts`' DWARF
    /// (one pass over `.debug_info`). Variables whose type or size cannot
    /// be read are left out.
    pub fn read(layouts: &Layouts) -> Globals {
        let mut vars = Vec::new();
        for unit in layouts.units() {
            let _ = read_unit(layouts, unit, &mut vars);
        }
        vars.sort_by(|a, b| a.addr.cmp(&b.addr).then(b.size.cmp(&a.size)));
        vars.dedup_by(|b, a| a.addr == b.addr);
        Globals { vars }
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

fn read_unit(
    layouts: &Layouts,
    unit: &gimli::Unit<Reader>,
    out: &mut Vec<Global>,
) -> gimli::Result<()> {
    let mut cursor = unit.entries();
    while let Some((_, e)) = cursor.next_dfs()? {
        if e.tag() != gimli::DW_TAG_variable {
            continue;
        }
        let Some(AttributeValue::Exprloc(x)) = e.attr_value(gimli::DW_AT_location)? else {
            continue;
        };
        let mut ops = x.operations(unit.encoding());
        let addr = match ops.next() {
            Ok(Some(gimli::Operation::Address { address })) => address,
            Ok(Some(gimli::Operation::AddressIndex { index })) => {
                match layouts.dwarf().address(unit, index) {
                    Ok(a) => a,
                    Err(_) => continue,
                }
            }
            _ => continue,
        };
        // Only the address itself (not `DW_OP_addr; DW_OP_stack_value`,
        // or TLS's `DW_OP_GNU_push_tls_address`).
        if !matches!(ops.next(), Ok(None)) {
            continue;
        }
        let Some(here) = e.offset().to_debug_info_offset(&unit.header) else {
            continue;
        };
        // Name and type may be on the declaration this defines.
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
            let Some(n) = next else {
                break;
            };
            origin = n;
            name = name.or_else(|| layouts.name(n));
            ty = ty.or_else(|| layouts.type_of(n));
        }
        let (Some(ty), Some(name)) = (ty, name) else {
            continue;
        };
        let Some(size) = layouts.size_of(ty).filter(|&s| s > 0) else {
            continue;
        };
        out.push(Global {
            name,
            addr,
            size,
            ty,
        });
    }
    Ok(())
}

/// An attribute of the entry at `r`.
fn e_attr(layouts: &Layouts, r: TypeRef, at: gimli::DwAt) -> Option<AttributeValue<Reader>> {
    let (unit, off) = layouts.locate(r)?;
    unit.entry(off).ok()?.attr_value(at).ok()?
}
