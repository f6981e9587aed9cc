//! Error helpers bound to one scenario file's text: values with their
//! spans turned into checked values or errors naming file, line and key.
//! Their own module so that `parse`, `host` and `startup` share them
//! without importing one another.

use crate::error::{Lines, ScenarioError};
use crate::units::{parse_duration, parse_size};
use elevator_core::{Duration, SECTOR_SIZE};
use toml::Spanned;

type S<T> = Spanned<T>;

/// The most wake-ups one periodic job or process may ask for over the time
/// limit (`time_limit / period`): ten million ticks simulate in seconds,
/// while `period = "1ns"` over an hour would never end.
pub const MAX_TICKS: u64 = 10_000_000;

/// Error helpers bound to one file's text.
pub(crate) struct Ctx<'a> {
    pub(crate) file: &'a str,
    pub(crate) lines: Lines,
}

impl Ctx<'_> {
    /// The 1-based line of byte offset `at`.
    pub(crate) fn line(&self, at: usize) -> usize {
        self.lines.line(at)
    }
    pub(crate) fn at<T>(&self, v: &S<T>, key: &str, message: impl Into<String>) -> ScenarioError {
        ScenarioError::new(
            self.file,
            Some(self.line(v.span().start)),
            Some(key),
            message,
        )
    }
    /// Where `v` stands: this file, its line, `key`.
    pub(crate) fn origin<T>(&self, v: &S<T>, key: &str) -> elevator_sched::stack::Origin {
        elevator_sched::stack::Origin::file(self.file, Some(self.line(v.span().start)), key)
    }
    /// A key that names one of two settings, `off` or `on`; `default` when
    /// the key is absent.
    pub(crate) fn either(
        &self,
        v: &Option<S<String>>,
        key: &str,
        [off, on]: [&str; 2],
        default: bool,
    ) -> Result<bool, ScenarioError> {
        let Some(v) = v else { return Ok(default) };
        match v.get_ref().as_str() {
            s if s == off => Ok(false),
            s if s == on => Ok(true),
            other => Err(self.at(v, key, format!("{other:?}: expected {off:?} or {on:?}"))),
        }
    }
    pub(crate) fn size(&self, v: &S<String>, key: &str) -> Result<u64, ScenarioError> {
        parse_size(v.get_ref()).map_err(|m| self.at(v, key, m))
    }
    /// A size that must be whole sectors: the block layer addresses
    /// 512-byte sectors, and a remainder would be dropped without a word.
    pub(crate) fn sectors(&self, v: &S<String>, key: &str) -> Result<u64, ScenarioError> {
        let bytes = self.size(v, key)?;
        if bytes % SECTOR_SIZE != 0 {
            return Err(self.at(
                v,
                key,
                format!("{bytes} is not a multiple of 512 bytes (one sector)"),
            ));
        }
        Ok(bytes)
    }
    pub(crate) fn duration(&self, v: &S<String>, key: &str) -> Result<Duration, ScenarioError> {
        parse_duration(v.get_ref()).map_err(|m| self.at(v, key, m))
    }
    /// The period of something that wakes up every period until the time
    /// limit: positive, and at most [`MAX_TICKS`] wake-ups in `time_limit`.
    pub(crate) fn period(
        &self,
        v: &S<String>,
        key: &str,
        time_limit: Duration,
    ) -> Result<Duration, ScenarioError> {
        let d = self.duration(v, key)?;
        if d == Duration::ZERO {
            return Err(self.at(v, key, "must be positive"));
        }
        let ticks = time_limit.0 / d.0;
        if ticks > MAX_TICKS {
            return Err(self.at(
                v,
                key,
                format!(
                    "{ticks} wake-ups within the time limit of {:.3} s; at most {MAX_TICKS} \
                     (lengthen the period or shorten time_limit)",
                    time_limit.as_secs_f64()
                ),
            ));
        }
        Ok(d)
    }
    pub(crate) fn int(
        &self,
        v: &S<i64>,
        key: &str,
        lo: i64,
        hi: i64,
    ) -> Result<i64, ScenarioError> {
        let x = *v.get_ref();
        if (lo..=hi).contains(&x) {
            Ok(x)
        } else {
            Err(self.at(v, key, format!("{x} is out of range {lo}..={hi}")))
        }
    }
}
