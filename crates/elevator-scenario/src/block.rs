//! `[block]` as the file spells it, read by the scenario (`parse.rs`, which
//! builds the block layer's settings from it) and the host (`host.rs`, which
//! takes its preset's kernel): a module of its own so that the two import
//! no circle.

use serde::Deserialize;
use toml::Spanned;

type S<T> = Spanned<T>;

/// `[block]`: a preset, then its fields one by one.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBlock {
    pub(crate) preset: Option<S<String>>,
    pub(crate) nr_requests: Option<S<i64>>,
    pub(crate) batch_requests: Option<S<i64>>,
    pub(crate) steal: Option<bool>,
    pub(crate) inflight_limit: Option<S<String>>,
    pub(crate) max_sectors: Option<S<String>>,
    pub(crate) restart_before_wakeup: Option<bool>,
}
