//! Errors of loading and running scenarios: each says where (file and line, or the `--set` key)
//! and what was expected.

use std::fmt;

/// Something wrong with a scenario, a policy name or an override.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// The file is not valid TOML or does not match the schema.
    Parse {
        /// File name (or `<catalog>/NAME.toml`).
        file: String,
        /// 1-based line, when known.
        line: Option<usize>,
        /// What the parser expected or found.
        message: String,
    },
    /// A value is out of range or inconsistent.
    Invalid {
        /// Where: a file name, then a dotted field path.
        field: String,
        /// What is allowed.
        expected: String,
        /// What was found.
        got: String,
    },
    /// A `--set KEY=VALUE` could not be applied.
    Override {
        /// The whole `KEY=VALUE` as given.
        given: String,
        /// Why.
        message: String,
    },
    /// A `--sweep PATH=RANGE` (or the sweep as a whole) is unusable.
    Sweep {
        /// The whole `PATH=RANGE` as given (or the flag at fault, e.g. `--seeds 0`).
        given: String,
        /// Why.
        message: String,
    },
    /// No catalog scenario of that name and no such file.
    UnknownScenario {
        /// The name asked for.
        name: String,
        /// The catalog's names.
        known: Vec<String>,
    },
    /// A scenario could not be written as TOML.
    Serialize {
        /// Why.
        message: String,
    },
    /// No preset and no scenario policy of that name.
    UnknownPolicy {
        /// The name asked for.
        name: String,
        /// The names available for this scenario.
        known: Vec<String>,
    },
}

impl Error {
    pub(crate) fn invalid(
        field: impl Into<String>,
        expected: impl Into<String>,
        got: impl fmt::Display,
    ) -> Self {
        Error::Invalid { field: field.into(), expected: expected.into(), got: got.to_string() }
    }

    pub(crate) fn config(policy: &str, e: seawall::ConfigError) -> Self {
        Error::invalid(format!("policies.{policy}: {}", e.field()), e.allowed(), e)
    }

    /// Prefixes the field path of an [`Error::Invalid`] with a file name.
    pub(crate) fn in_file(self, file: &str) -> Self {
        match self {
            Error::Invalid { field, expected, got } => {
                Error::Invalid { field: format!("{file}: {field}"), expected, got }
            }
            other => other,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Parse { file, line: Some(l), message } => write!(f, "{file}:{l}: {message}"),
            Error::Parse { file, line: None, message } => write!(f, "{file}: {message}"),
            Error::Invalid { field, expected, got } => {
                write!(f, "{field}: expected {expected}, got {got}")
            }
            Error::Override { given, message } => write!(f, "--set {given}: {message}"),
            Error::Sweep { given, message } if given.is_empty() => write!(f, "--sweep: {message}"),
            Error::Sweep { given, message } => write!(f, "--sweep {given}: {message}"),
            Error::UnknownScenario { name, known } => write!(
                f,
                "no scenario `{name}` in the catalog and no such file (catalog: {})",
                known.join(", ")
            ),
            Error::Serialize { message } => write!(f, "cannot write the scenario: {message}"),
            Error::UnknownPolicy { name, known } => {
                write!(f, "no policy `{name}` (available: {})", known.join(", "))
            }
        }
    }
}

impl std::error::Error for Error {}
