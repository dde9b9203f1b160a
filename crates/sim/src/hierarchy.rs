//! placeholder: being written
use crate::*;
pub struct Hierarchy { cfg: HierarchyConfig }
impl Hierarchy {
    pub fn new(cfg: &HierarchyConfig) -> Result<Self, ConfigError> { cfg.validate()?; Ok(Hierarchy { cfg: cfg.clone() }) }
    pub fn config(&self) -> &HierarchyConfig { &self.cfg }
    pub fn access(&mut self, _core: usize, _a: Access) -> AccessResult { unimplemented!() }
}
