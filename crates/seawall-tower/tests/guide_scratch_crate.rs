//! The guide's promise to a new user, checked from outside the workspace: a fresh crate whose
//! `[dependencies]` are exactly the table of the guide's section 0 (with the path pointed at
//! this checkout) compiles the guide's axum service (section 1) and reqwest client (section 2).
//!
//! The table and the examples are read from `src/_guide/mod.rs` itself, so the test follows the
//! guide as it is edited: a feature left out of the table, a renamed item or a missing
//! re-export turns it red. It resolves the scratch crate against the workspace's `Cargo.lock`
//! (the same versions the workspace tests) and builds in a folder of its own under the target
//! directory. `cargo check`: type-checking is what the promise is about, and it skips code
//! generation. Slow (it checks axum, reqwest and seawall-tower afresh: about a minute on two
//! cores), so it is ignored by default; `.ci/run` runs it with the other ignored tests.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The guide's documentation text: `//!` lines unprefixed, and the bodies of its
/// `doc = r##"…"##` attributes (the feature-gated examples) as they are.
fn guide_text(source: &str) -> String {
    let mut out = String::new();
    let mut in_attr = false;
    for line in source.lines() {
        if in_attr {
            if line.trim_start().starts_with("\"##") {
                in_attr = false;
            } else {
                out.push_str(line);
                out.push('\n');
            }
        } else if let Some(rest) = line.strip_prefix("//!") {
            out.push_str(rest.strip_prefix(' ').unwrap_or(rest));
            out.push('\n');
        } else if line.trim_start().starts_with("doc = r##\"") {
            in_attr = true;
        }
    }
    out
}

/// The fenced blocks of `text` under the heading that starts with `heading`, until the next
/// heading: `(info string, body)`.
fn blocks_under(text: &str, heading: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut in_section = false;
    let mut fence: Option<(String, String)> = None;
    for line in text.lines() {
        if let Some((info, body)) = fence.as_mut() {
            if line.starts_with("```") {
                out.push((std::mem::take(info), std::mem::take(body)));
                fence = None;
            } else {
                body.push_str(line);
                body.push('\n');
            }
            continue;
        }
        if line.starts_with("# ") {
            in_section = line.starts_with(heading);
        } else if in_section && let Some(info) = line.strip_prefix("```") {
            fence = Some((info.to_owned(), String::new()));
        }
    }
    out
}

/// A doctest's source as rustdoc compiles it: `# ` hides a line from the page, not the build.
fn unhide(body: &str) -> String {
    body.lines()
        .map(|l| match l.trim_start().strip_prefix('#') {
            Some(rest) if rest.is_empty() || rest.starts_with(' ') => {
                rest.strip_prefix(' ').unwrap_or(rest).to_owned()
            }
            _ => l.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn scratch_crate(dir: &Path, manifest_dir: &Path) -> usize {
    let source = std::fs::read_to_string(manifest_dir.join("src/_guide/mod.rs")).unwrap();
    let text = guide_text(&source);
    let table = blocks_under(&text, "# 0.")
        .into_iter()
        .find(|(info, _)| info == "toml")
        .expect("the guide's section 0 has a ```toml block")
        .1;
    let guide_path = "\"../seawall/crates/seawall-tower\"";
    assert!(table.contains(guide_path), "the table's path is {guide_path}:\n{table}");
    let table = table.replace(guide_path, &format!("{:?}", manifest_dir.display().to_string()));
    let manifest = format!(
        "[package]\nname = \"guide-scratch\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
         # Not a member of the seawall workspace above it.\n[workspace]\n\n{table}"
    );
    let mut main = String::from("#![allow(unused, clippy::all)]\n\n");
    let mut n = 0;
    for section in ["# 1.", "# 2."] {
        let rust: Vec<_> = blocks_under(&text, section)
            .into_iter()
            .filter(|(info, _)| info.is_empty() || info.starts_with("rust") || info == "no_run")
            .collect();
        assert!(!rust.is_empty(), "no Rust example under {section}");
        for (_, body) in rust {
            n += 1;
            main.push_str(&format!("fn example_{n}() {{\n{}\n}}\n\n", unhide(&body)));
        }
    }
    main.push_str("fn main() {}\n");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    std::fs::write(dir.join("src/main.rs"), main).unwrap();
    let workspace = manifest_dir.parent().and_then(Path::parent).unwrap();
    std::fs::copy(workspace.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    n
}

#[test]
#[ignore = "slow: checks a scratch crate outside the workspace (about a minute)"]
fn the_guide_compiles_in_a_crate_of_its_own() {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("guide-scratch");
    let _ = std::fs::remove_dir_all(dir.join("src"));
    let examples = scratch_crate(&dir, &manifest_dir);
    assert!(examples >= 2, "{examples} examples");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(["check", "--quiet", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the guide's table and examples do not build outside the workspace:\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(dir.join("src/main.rs")).unwrap_or_default()
    );
}

/// The extraction itself, on a small text: the hidden lines come back, other sections stay out.
#[test]
fn blocks_are_read_from_their_section_only() {
    let src = "//! # 1. A\n//!\n//! ```\n//! # use x;\n//! let a = 1;\n//! ```\n//! # 2. B\n\
               #![cfg_attr(\n    f,\n    doc = r##\"\n```\nlet b = 2;\n```\n\"##\n)]\n//! # 3. C\n//! ```\n//! no\n//! ```\n";
    let text = guide_text(src);
    let one = blocks_under(&text, "# 1.");
    assert_eq!(one.len(), 1);
    assert_eq!(unhide(&one[0].1), "use x;\nlet a = 1;");
    let two = blocks_under(&text, "# 2.");
    assert_eq!(two, vec![(String::new(), "let b = 2;\n".to_owned())]);
}
