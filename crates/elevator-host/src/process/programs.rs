//! The list of program kinds: each module's `TYPE` (see `registry.rs` for
//! what a [`ProgramType`] is). Adding a program kind is its module and one
//! line here.

use super::registry::ProgramType;

/// Every program kind, in the order `elevator list` and errors show them.
pub const PROGRAMS: &[&ProgramType] = &[
    &super::cat::TYPE,
    &super::find_cat::TYPE,
    &super::dd::TYPE,
    &super::cp::TYPE,
    &super::write_fsync::TYPE,
    &super::app_start::TYPE,
    &super::player::TYPE,
    &super::tiotest::TYPE,
    &super::fsync_tester::TYPE,
];

/// The program kind named `name`.
pub fn find(name: &str) -> Option<&'static ProgramType> {
    PROGRAMS.iter().copied().find(|t| t.name == name)
}

/// The names of every program kind, comma-separated, for error messages.
pub fn names() -> String {
    PROGRAMS
        .iter()
        .map(|t| t.name)
        .collect::<Vec<_>>()
        .join(", ")
}
