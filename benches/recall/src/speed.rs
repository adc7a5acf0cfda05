use anyhow::{bail, Result};
use std::path::PathBuf;

pub fn run(_facts: usize, _queries: usize, _dir: Option<PathBuf>) -> Result<()> {
    bail!("speed: not measured yet")
}
