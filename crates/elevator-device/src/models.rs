//! The device models a profile may name, and loading a profile through
//! them.
//!
//! Adding a model is one module (the model, its profile schema and its
//! `DeviceModelType`) and one line in [`DEVICE_MODELS`]: `kind = "NAME"`
//! profiles then load, `elevator list` prints it, and `tests/models.rs`
//! holds every registered model to the shared device checks.

use crate::profile::{
    DeviceModelType, KindOnly, ProfileError, ProfileText, BUILTINS, HDD, MAX_PROFILE_BYTES, SDCARD,
    SSD,
};
use crate::Device;

/// Every device model.
pub const DEVICE_MODELS: &[&DeviceModelType] = &[&HDD, &SSD, &SDCARD];

/// Build a device from a built-in profile name or a path to a `.toml`
/// profile.
pub fn open(name_or_path: &str) -> Result<Box<dyn Device>, ProfileError> {
    if let Some(&(name, _, text)) = BUILTINS.iter().find(|b| b.0 == name_or_path) {
        return parse(name, text);
    }
    match crate::read_input(std::path::Path::new(name_or_path), MAX_PROFILE_BYTES) {
        Ok(text) => parse(name_or_path, &text),
        Err(source) => Err(ProfileError::NotFound {
            name: name_or_path.to_string(),
            builtins: BUILTINS.iter().map(|b| b.0).collect::<Vec<_>>().join(", "),
            source,
        }),
    }
}

/// Build a device from profile text; `source_name` names it in errors and
/// becomes the device's name (a path's file stem).
pub fn parse(source_name: &str, text: &str) -> Result<Box<dyn Device>, ProfileError> {
    parse_with(DEVICE_MODELS, source_name, text)
}

/// [`parse`] with the models of `models` (a test's registry with a toy).
pub fn parse_with(
    models: &[&DeviceModelType],
    source_name: &str,
    text: &str,
) -> Result<Box<dyn Device>, ProfileError> {
    let profile = ProfileText {
        file: source_name,
        text,
    };
    let name = std::path::Path::new(source_name)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or(source_name)
        .to_string();
    // First only the kind, then the whole file against that kind's schema.
    let head: KindOnly = profile.parse()?;
    match models.iter().find(|m| m.name == head.kind) {
        Some(model) => (model.build)(&profile, name),
        None => {
            let known: Vec<String> = models.iter().map(|m| format!("{:?}", m.name)).collect();
            Err(profile.error(
                "kind",
                format!(
                    "unknown device kind {:?}: expected {}",
                    head.kind,
                    match known.split_last() {
                        Some((last, [])) => last.clone(),
                        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
                        None => "a registered model".into(),
                    }
                ),
            ))
        }
    }
}
