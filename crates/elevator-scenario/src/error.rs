//! Errors that name the file, the line and the key.

use std::fmt;

/// A problem with a scenario file (or a command-line override of one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// The offending key (`job.bs`, `sched.deadline.fifo_batch`), when known.
    pub key: Option<String>,
    pub message: String,
}

impl ScenarioError {
    pub fn new(
        file: &str,
        line: Option<usize>,
        key: Option<&str>,
        message: impl Into<String>,
    ) -> Self {
        ScenarioError {
            file: file.to_string(),
            line,
            key: key.map(str::to_string),
            message: message.into(),
        }
    }
}

impl ScenarioError {
    /// An error in a command-line flag or argument (`key` names it, when
    /// there is one): the one constructor for them.
    pub fn command_line(key: Option<&str>, message: impl Into<String>) -> Self {
        ScenarioError::new(elevator_sched::stack::COMMAND_LINE, None, key, message)
    }
}

/// A stack that cannot be built, as the scenario error that names the same
/// file, line and key (or the command line and its flag).
impl From<elevator_sched::stack::ConfigError> for ScenarioError {
    fn from(e: elevator_sched::stack::ConfigError) -> Self {
        let (file, line, key) = e.origin().parts();
        ScenarioError::new(file, line, key, e.message())
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ": key `{key}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ScenarioError {}

/// Where each line of a text starts, so that the line of a byte offset is
/// a binary search: a file of 50,000 jobs asks for 50,000 lines, and
/// counting newlines from the top each time made parsing quadratic.
#[derive(Debug)]
pub(crate) struct Lines {
    starts: Vec<usize>,
}

impl Lines {
    pub(crate) fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(
            text.bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i + 1),
        );
        Lines { starts }
    }

    /// The 1-based line of byte offset `at`.
    pub(crate) fn line(&self, at: usize) -> usize {
        self.starts.partition_point(|&s| s <= at)
    }
}

/// The key assigned on the line containing byte offset `at`, if the line
/// reads `key = value`.
pub(crate) fn key_on_line(text: &str, at: usize) -> Option<String> {
    let at = at.min(text.len());
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    let line = &text[start..end];
    let (key, _) = line.split_once('=')?;
    let key = key.trim().trim_matches('"');
    (!key.is_empty() && !key.starts_with('[')).then(|| key.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_one_based_and_count_newlines_before_the_offset() {
        let text = "a = 1\nb = 2\n\nc = 3";
        let lines = Lines::new(text);
        for (at, line) in [(0, 1), (5, 1), (6, 2), (12, 3), (13, 4), (17, 4), (99, 4)] {
            assert_eq!(lines.line(at), line, "offset {at}");
        }
    }
}
