//! Errors for unreadable input: every one names the file, the line when known, and what was expected.

use std::fmt;
use std::path::{Path, PathBuf};

/// A file that could not be read, parsed or understood.
///
/// The audit never panics on input: a malformed call graph or imported config becomes one of
/// these, and the CLI turns it into exit status 2. `Display` reads
/// `file:line: what went wrong (expected …)`.
#[derive(Debug)]
pub struct Error {
    file: PathBuf,
    line: Option<usize>,
    kind: ErrorKind,
}

/// What went wrong.
#[derive(Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The file could not be read (missing, permissions, not UTF-8).
    Io(std::io::Error),
    /// The file is not well-formed TOML, YAML or JSON; the parser's own message.
    Syntax(String),
    /// The file is well-formed but a value is wrong.
    Invalid {
        /// The field or construct, e.g. `calls[2].retries[0].attempts`.
        what: String,
        /// What was expected instead, e.g. `an integer in [1, 10]`.
        expected: String,
    },
    /// A reference (a service name, a route, a profile) points at nothing.
    NotFound {
        /// What was looked for, e.g. `VirtualService "orders"`.
        what: String,
    },
}

impl Error {
    /// A new error in `file` at `line` (1-based), if known.
    pub fn new(file: impl Into<PathBuf>, line: Option<usize>, kind: ErrorKind) -> Self {
        Error { file: file.into(), line, kind }
    }

    /// Shorthand for [`ErrorKind::Invalid`].
    pub fn invalid(
        file: &Path,
        line: Option<usize>,
        what: impl Into<String>,
        expected: impl Into<String>,
    ) -> Self {
        Error::new(file, line, ErrorKind::Invalid { what: what.into(), expected: expected.into() })
    }

    /// Shorthand for [`ErrorKind::NotFound`].
    pub fn not_found(file: &Path, line: Option<usize>, what: impl Into<String>) -> Self {
        Error::new(file, line, ErrorKind::NotFound { what: what.into() })
    }

    /// The file the error is in.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// The 1-based line, when the parser or the importer knows it.
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        match &self.kind {
            ErrorKind::Io(e) => write!(f, ": cannot read: {e}"),
            ErrorKind::Syntax(msg) => write!(f, ": {msg}"),
            ErrorKind::Invalid { what, expected } => {
                write!(f, ": invalid {what}: expected {expected}")
            }
            ErrorKind::NotFound { what } => write!(f, ": {what} not found"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// The largest graph or imported config file read, 16 MiB: far above any real mesh or SDK config,
/// and small enough that a graph naming `/dev/zero` or a huge file fails fast instead of filling
/// memory.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// Reads a file to a string, mapping failures to [`ErrorKind::Io`] and refusing files over
/// [`MAX_FILE_BYTES`] (read bounded, so an endless file is refused too).
pub(crate) fn read(path: &Path) -> Result<String, Error> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_string(&mut text))
        .map_err(|e| Error::new(path, None, ErrorKind::Io(e)))?;
    if text.len() as u64 > MAX_FILE_BYTES {
        let limit = format!("at most {} MiB", MAX_FILE_BYTES >> 20);
        return Err(Error::invalid(path, None, "the file's size", limit));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_file_is_refused_not_read_into_memory() {
        let e = read(Path::new("/dev/zero")).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Invalid { .. }), "{e}");
        assert!(e.to_string().contains("16 MiB"), "{e}");
    }

    #[test]
    fn display_names_file_line_and_expectation() {
        let e = Error::invalid(Path::new("g.toml"), Some(7), "attempts", "an integer in [1, 10]");
        assert_eq!(e.to_string(), "g.toml:7: invalid attempts: expected an integer in [1, 10]");
        let e = Error::not_found(Path::new("vs.yaml"), None, "VirtualService \"orders\"");
        assert_eq!(e.to_string(), "vs.yaml: VirtualService \"orders\" not found");
    }
}
