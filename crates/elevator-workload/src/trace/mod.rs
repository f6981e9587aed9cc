//! Block traces from the outside world: streaming readers for the formats
//! users have ([`read`]) and their replay through the simulator, open or
//! closed loop ([`replay`]).

pub mod read;
pub mod replay;

pub use read::{open_trace, parse_all, TraceFormat, TraceReader, TraceRecord};
pub use replay::{ReplayMode, ReplaySummary, TraceReplay};

#[cfg(test)]
mod tests;
