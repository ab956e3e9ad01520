//! Reading the files a configuration names (secrets, certificates, keys): only a regular file,
//! and no more than a bound. A FIFO or a device would block the load, and with it every later
//! reload, until something wrote to it; `/dev/zero` would be read until memory ran out (both
//! found by review).

use std::io::Read;
use std::path::Path;

/// The whole of the regular file at `path`, if it holds at most `max` bytes.
pub fn read_regular(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("it is not a regular file".into());
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(max + 1).read_to_end(&mut bytes))
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > max {
        return Err(format!("it is longer than {max} bytes"));
    }
    Ok(bytes)
}

/// The largest configuration file read: far past any real one.
pub const MAX_CONFIG: u64 = 16 * 1024 * 1024;

/// [`read_regular`] as UTF-8 text.
pub fn read_regular_text(path: &Path, max: u64) -> Result<String, String> {
    read_text_at(path, max).map_err(|(e, _)| e)
}

/// [`read_regular_text`], with the line and column (from 1) of the first byte that is not
/// UTF-8 when that is what is wrong.
pub fn read_text_at(path: &Path, max: u64) -> Result<String, (String, Option<(usize, usize)>)> {
    let bytes = read_regular(path, max).map_err(|e| (e, None))?;
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let before = &e.as_bytes()[..at];
        let line = before.iter().filter(|b| **b == b'\n').count() + 1;
        let start = before
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1);
        let col = String::from_utf8_lossy(&before[start..]).chars().count() + 1;
        (
            format!("it is not UTF-8 text (line {line}, byte {at})"),
            Some((line, col)),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_regular_file_within_the_bound_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a");
        std::fs::write(&file, b"12345").unwrap();
        assert_eq!(read_regular(&file, 5).unwrap(), b"12345");
        assert!(read_regular(&file, 4)
            .unwrap_err()
            .contains("longer than 4"));
        assert!(read_regular(dir.path(), 5)
            .unwrap_err()
            .contains("not a regular file"));
        assert!(read_regular(Path::new("/dev/zero"), 5)
            .unwrap_err()
            .contains("not a regular file"));
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            assert!(read_regular(&fifo, 5)
                .unwrap_err()
                .contains("not a regular file"));
        }
        assert!(read_regular(&dir.path().join("none"), 5).is_err());
    }

    #[test]
    fn text_that_is_not_utf8_is_told_by_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.toml");
        std::fs::write(&file, b"a = 1\nb = \"\xff\"\n").unwrap();
        let e = read_regular_text(&file, 100).unwrap_err();
        assert!(e.contains("not UTF-8") && e.contains("line 2"), "{e}");
        assert_eq!(read_text_at(&file, 100).unwrap_err().1, Some((2, 6)));
        std::fs::write(&file, "a = 1\n").unwrap();
        assert_eq!(read_regular_text(&file, 100).unwrap(), "a = 1\n");
    }
}
