//! Reading an input file (a scenario, a device profile, a trace, a fio job
//! file, a DiskSim drive) with a size cap.
//!
//! Anything that is not a regular file is refused before it is opened: a
//! FIFO blocks `open(2)` until a writer comes, and `/dev/zero` never ends.
//! A regular file is read up to `max` bytes; one byte more is an error,
//! never a silent truncation.

use std::io::{Error, ErrorKind, Read};
use std::path::Path;

/// The text of the regular file at `path`, if it is at most `max` bytes of
/// UTF-8.
pub fn read_input(path: &Path, max: usize) -> std::io::Result<String> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            "not a regular file (a FIFO, device or directory cannot be read as input)",
        ));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(max as u64 + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() > max {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!("larger than {max} bytes, the most read from an input file"),
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        Error::new(
            ErrorKind::InvalidData,
            format!("line {line}: not UTF-8 text (byte {at})"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_is_not_a_regular_file_and_what_is_too_large() {
        let dir = std::env::temp_dir().join(format!("elevator-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let err = read_input(&dir, 100).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        let file = dir.join("a.toml");
        std::fs::write(&file, "x".repeat(101)).unwrap();
        let err = read_input(&file, 100).unwrap_err();
        assert!(err.to_string().contains("larger than 100 bytes"), "{err}");
        assert_eq!(read_input(&file, 101).unwrap().len(), 101);
        std::fs::write(&file, [b'a', 0xff]).unwrap();
        let err = read_input(&file, 100).unwrap_err();
        assert!(err.to_string().contains("not UTF-8"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn dev_zero_is_refused_at_once() {
        let err = read_input(Path::new("/dev/zero"), 100).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }
}
