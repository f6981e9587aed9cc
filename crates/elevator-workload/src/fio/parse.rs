//! Reading a job file into sections of options, as fio's `init.c`
//! (`__parse_jobs_ini`) and `options.c` (`fio_option_dup_subs`,
//! `fio_keyword_replace`) do:
//!
//! - each line loses leading blanks and everything from the first `;` and
//!   from the first `#` on (`strip_blank_end`), so `bs=4k ; comment` is
//!   `bs=4k`; blank lines are skipped;
//! - `[name]` opens a section; one whose name starts with `global` sets
//!   options for the job sections after it (not before: fio copies the
//!   defaults as they stand when it meets a job); an option before any
//!   section is an error;
//! - `include FILE` reads FILE's options into the current section (FILE
//!   is relative to the including file when it is there, else as
//!   written); an included file may not open sections;
//! - in option lines, `${VAR}` takes the environment variable's value
//!   (fio puts nothing for an unset one; we refuse it, naming it) and
//!   `$pagesize`, `$mb_memory`, `$ncpus` the machine's.
//!
//! Nothing stops at the first error: every bad line is reported.

use super::{FioError, FioErrors};
use std::path::{Path, PathBuf};

/// One `key[=value]` line as written (after comments are cut and
/// variables expanded).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawOpt {
    pub key: String,
    pub value: Option<String>,
    pub file: PathBuf,
    pub line: usize,
}

impl RawOpt {
    pub fn error(&self, message: impl Into<String>) -> FioError {
        FioError {
            file: self.file.clone(),
            line: self.line,
            option: self.key.clone(),
            message: message.into(),
        }
    }
}

/// A `[section]` and its options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawSection {
    pub name: String,
    pub global: bool,
    pub file: PathBuf,
    pub line: usize,
    pub opts: Vec<RawOpt>,
}

/// What `$pagesize`, `$mb_memory` and `$ncpus` stand for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keywords {
    pub pagesize: u64,
    pub mb_memory: u64,
    pub ncpus: u64,
}

impl Default for Keywords {
    fn default() -> Self {
        Keywords {
            pagesize: 4096,
            mb_memory: 1024,
            ncpus: 1,
        }
    }
}

/// Where the text of the job file and its includes, and the variables,
/// come from.
pub struct Source<'a> {
    pub env: &'a dyn Fn(&str) -> Option<String>,
    pub read: &'a mut dyn FnMut(&Path) -> Result<String, String>,
    pub keywords: Keywords,
    /// Bytes that may still be read, includes counted.
    pub budget: usize,
}

impl std::fmt::Debug for Source<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Source")
            .field("keywords", &self.keywords)
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

/// Most `include` levels.
pub const MAX_INCLUDE_DEPTH: usize = 8;

/// Read `path` into sections; every error found is returned.
pub fn read(path: &Path, src: &mut Source<'_>) -> Result<Vec<RawSection>, FioErrors> {
    let mut sections = Vec::new();
    let mut errors = Vec::new();
    read_file(path, src, &mut sections, &mut errors, 0, None);
    if errors.is_empty() {
        Ok(sections)
    } else {
        Err(FioErrors(errors))
    }
}

fn read_file(
    path: &Path,
    src: &mut Source<'_>,
    sections: &mut Vec<RawSection>,
    errors: &mut Vec<FioError>,
    depth: usize,
    from: Option<&RawOpt>,
) {
    let fail = |message: String| match from {
        Some(o) => o.error(format!("cannot read {}: {message}", path.display())),
        None => FioError {
            file: path.to_path_buf(),
            line: 0,
            option: "job file".into(),
            message,
        },
    };
    let text = match (src.read)(path) {
        Ok(t) => t,
        Err(e) => {
            errors.push(fail(e));
            return;
        }
    };
    match src.budget.checked_sub(text.len()) {
        Some(left) => src.budget = left,
        None => {
            errors.push(fail(format!(
                "the job file and its includes exceed {} bytes",
                super::MAX_JOB_FILE_BYTES
            )));
            return;
        }
    }
    for (i, raw) in text.lines().enumerate() {
        if errors.len() >= 100 {
            return;
        }
        let line = i + 1;
        let here = |key: &str| RawOpt {
            key: key.to_string(),
            value: None,
            file: path.to_path_buf(),
            line,
        };
        let p = strip(raw);
        if p.is_empty() {
            continue;
        }
        if let Some(rest) = p.strip_prefix('[') {
            if depth > 0 {
                errors.push(here(p).error("an included file may not open sections"));
                continue;
            }
            let Some(name) = rest.strip_suffix(']') else {
                errors.push(here(p).error("a section header ends with ']'"));
                continue;
            };
            let name = name.trim();
            if name.is_empty() {
                errors.push(here(p).error("a section needs a name"));
                continue;
            }
            sections.push(RawSection {
                name: name.to_string(),
                global: name.starts_with("global"),
                file: path.to_path_buf(),
                line,
                opts: Vec::new(),
            });
            continue;
        }
        if let Some(file) = p.strip_prefix("include") {
            let file = file.trim();
            let opt = here("include");
            if file.is_empty() {
                errors.push(opt.error("names no file"));
                continue;
            }
            if sections.is_empty() {
                errors.push(opt.error("outside of a [section]"));
                continue;
            }
            if depth >= MAX_INCLUDE_DEPTH {
                errors.push(opt.error(format!(
                    "includes nested more than {MAX_INCLUDE_DEPTH} deep"
                )));
                continue;
            }
            let beside = path.parent().unwrap_or(Path::new(".")).join(file);
            let target =
                if Path::new(file).is_absolute() || !beside.exists() && Path::new(file).exists() {
                    PathBuf::from(file)
                } else {
                    beside
                };
            read_file(&target, src, sections, errors, depth + 1, Some(&opt));
            continue;
        }
        let (key, value) = match p.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (p.trim(), None),
        };
        let opt = here(key);
        let value = match value.map(|v| expand(v, src.env, &src.keywords)) {
            None => None,
            Some(Ok(v)) => Some(v),
            Some(Err(e)) => {
                errors.push(opt.error(e));
                continue;
            }
        };
        let Some(section) = sections.last_mut() else {
            errors.push(opt.error("outside of a [section] (fio reads no options before one)"));
            continue;
        };
        section.opts.push(RawOpt { value, ..opt });
    }
}

/// fio's `strip_blank_front` and `strip_blank_end`: leading blanks off,
/// everything from the first `;` and the first `#` off, trailing blanks
/// and control characters off.
pub fn strip(raw: &str) -> &str {
    let mut p = raw.trim_start();
    if let Some(i) = p.find(';') {
        p = &p[..i];
    }
    if let Some(i) = p.find('#') {
        p = &p[..i];
    }
    p.trim_end_matches(|c: char| c.is_whitespace() || c.is_control())
}

/// `${VAR}` from `env`, then the keywords. An unset variable is an error
/// naming it.
fn expand(s: &str, env: &dyn Fn(&str) -> Option<String>, kw: &Keywords) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        match after.find('}') {
            Some(end) if end > 0 => {
                out.push_str(&rest[..start]);
                let name = &after[..end];
                let value = env(name).ok_or_else(|| {
                    format!(
                        "${{{name}}} is not set (fio would put nothing there); \
                         set it in the environment"
                    )
                })?;
                out.push_str(&value);
                rest = &after[end + 1..];
            }
            _ => {
                out.push_str(&rest[..start + 2]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    for (word, value) in [
        ("$pagesize", kw.pagesize),
        ("$mb_memory", kw.mb_memory),
        ("$ncpus", kw.ncpus),
    ] {
        if out.contains(word) {
            out = out.replace(word, &value.to_string());
            if out.contains(['+', '*', '/']) || out.trim_start_matches('-').contains('-') {
                return Err(format!(
                    "{s:?}: arithmetic on {word} (fio hands it to bc) is not supported"
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<RawSection>, FioErrors> {
        let env = |v: &str| (v == "BS").then(|| "8k".to_string());
        let text = text.to_string();
        let mut reader = |_: &Path| Ok(text.clone());
        let mut src = Source {
            env: &env,
            read: &mut reader,
            keywords: Keywords::default(),
            budget: 1 << 20,
        };
        super::read(Path::new("j.fio"), &mut src)
    }

    #[test]
    fn inline_comments_are_cut_as_fio_cuts_them() {
        assert_eq!(strip("  bs=4k ; comment"), "bs=4k");
        assert_eq!(strip("runtime=3600  # Max runtime: 1 hour"), "runtime=3600");
        assert_eq!(
            strip("filename=datafile.tmp\t; or /dev/sda"),
            "filename=datafile.tmp"
        );
        assert_eq!(strip("; whole line"), "");
        let s = parse("[j]\nbs=${BS} # size\nsize=$pagesize\n").unwrap();
        assert_eq!(s[0].opts[0].value.as_deref(), Some("8k"));
        assert_eq!(s[0].opts[1].value.as_deref(), Some("4096"));
    }

    #[test]
    fn every_error_is_reported_at_once() {
        let e = parse("bs=4k\n[j]\nrw=${NOPE}\n[k\niodepth=${ALSO}\n").unwrap_err();
        assert_eq!(e.0.len(), 4, "{e}");
        assert_eq!(e.0[0].line, 1);
        assert!(e.0[1].message.contains("${NOPE}"), "{e}");
        assert_eq!(e.0[2].line, 4);
        assert_eq!(e.0[3].line, 5);
    }
}
