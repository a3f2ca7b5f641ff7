//! The windowed filters as the server sees them: their one registration ([`FAMILY`], listed in
//! lib.rs), which brings the type `lcbloomBW` and the `INFO lcbloom` fields `bf_window_keys`
//! and `bf_window_bytes`. No commands of their own: the `BF.*` commands of the Bloom family
//! (`bloom/table.rs`) serve them, and a windowed filter counts in `bf_keys`/`bf_bytes` too.

use super::datatype::{WINDOWED, WINDOW_TYPE};
use crate::server::module::Family;
use crate::server::stats::InfoField;

pub static FAMILY: Family = Family {
    types: &[&WINDOW_TYPE],
    commands: &[],
    category: c"bloom",
    configs: &[],
    ignored_arguments: &[],
    info: &[InfoField::Tally("bf_window", &WINDOWED)],
};
