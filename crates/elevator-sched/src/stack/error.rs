//! The one configuration error of the stack builder, naming where the bad
//! setting came from.

use crate::TunableError;
use std::fmt;

/// How errors name the command line as their source.
pub const COMMAND_LINE: &str = "<command line>";

/// Where a setting came from: a flag, or a key of a scenario file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The command line; `flag` is the flag as given (`--set
    /// "deadline.fifo_batch=8"`, `--sched`), if there is one to name.
    CommandLine { flag: Option<String> },
    /// A scenario file's `key` (`sched.deadline.fifo_batch`), at `line`
    /// (1-based) when known.
    File {
        file: String,
        line: Option<usize>,
        key: Option<String>,
    },
}

impl Origin {
    /// The command line's `flag`: the one constructor every flag error
    /// uses.
    pub fn flag(flag: impl Into<String>) -> Origin {
        Origin::CommandLine {
            flag: Some(flag.into()),
        }
    }

    /// The command line, with no flag to name.
    pub fn command_line() -> Origin {
        Origin::CommandLine { flag: None }
    }

    /// `key` of scenario `file`, at `line` when known.
    pub fn file(file: &str, line: Option<usize>, key: &str) -> Origin {
        Origin::File {
            file: file.to_string(),
            line,
            key: Some(key.to_string()),
        }
    }

    /// The file (or [`COMMAND_LINE`]), the line and the key an error names,
    /// as a scenario error spells them; a flag goes in front of the
    /// message instead of as a key.
    pub fn parts(&self) -> (&str, Option<usize>, Option<&str>) {
        match self {
            Origin::CommandLine { .. } => (COMMAND_LINE, None, None),
            Origin::File { file, line, key } => (file, *line, key.as_deref()),
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::CommandLine { flag: None } => f.write_str(COMMAND_LINE),
            Origin::CommandLine { flag: Some(flag) } => write!(f, "{COMMAND_LINE}: {flag}"),
            Origin::File { file, line, key } => {
                f.write_str(file)?;
                if let Some(line) = line {
                    write!(f, ":{line}")?;
                }
                if let Some(key) = key {
                    write!(f, ": key `{key}`")?;
                }
                Ok(())
            }
        }
    }
}

/// A policy stack that cannot be built as asked.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// No registered policy has this name or alias.
    UnknownPolicy { origin: Origin, name: String },
    /// Nothing names a policy to run.
    NoPolicy { origin: Origin },
    /// A tunable the policy does not have, or a value it does not take.
    Tunable {
        origin: Origin,
        error: Box<TunableError>,
    },
    /// A setting that does not exist or does not take this value
    /// (`--set block.NAME`, `--set` without `PREFIX.NAME=VALUE`).
    Setting { origin: Origin, message: String },
    /// A setting the engine in use does not model (block-layer settings on
    /// the io_uring runtime).
    Unsupported { origin: Origin, message: String },
}

impl ConfigError {
    /// Where the bad setting came from.
    pub fn origin(&self) -> &Origin {
        match self {
            ConfigError::UnknownPolicy { origin, .. }
            | ConfigError::NoPolicy { origin }
            | ConfigError::Tunable { origin, .. }
            | ConfigError::Setting { origin, .. }
            | ConfigError::Unsupported { origin, .. } => origin,
        }
    }

    /// What is wrong, without the origin (a flag named on the command line
    /// leads it).
    pub fn message(&self) -> String {
        let what = match self {
            ConfigError::UnknownPolicy { name, .. } => {
                let known: Vec<&str> = crate::registry().iter().map(|t| t.name).collect();
                format!("unknown scheduler {name:?} (known: {})", known.join(", "))
            }
            ConfigError::NoPolicy { .. } => "no scheduler to run".to_string(),
            ConfigError::Tunable { error, .. } => error.to_string(),
            ConfigError::Setting { message, .. } | ConfigError::Unsupported { message, .. } => {
                message.clone()
            }
        };
        match self.origin() {
            Origin::CommandLine { flag: Some(flag) } => format!("{flag}: {what}"),
            _ => what,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (file, line, key) = self.origin().parts();
        f.write_str(file)?;
        if let Some(line) = line {
            write!(f, ":{line}")?;
        }
        if let Some(key) = key {
            write!(f, ": key `{key}`")?;
        }
        write!(f, ": {}", self.message())
    }
}

impl std::error::Error for ConfigError {}
