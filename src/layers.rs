//! ARCHITECTURE.md's code map and invariants, checked against the source:
//! which of the crate's modules each part may use; that nothing outside
//! `src/python` names pyo3 or the `python` feature (`cargo test` builds
//! without the feature, which catches a pyo3 type outside the bindings, but
//! not one behind `#[cfg(feature = "python")]`); and that a call sleeps only
//! through its `Clock`.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// Each part of the crate, and the crate modules its code may use.
const ALLOWED: [(&str, &[&str]); 8] = [
    ("engine", &[]),
    ("conversation", &[]),
    ("testing", &[]),
    ("stream", &["engine", "conversation"]),
    ("http", &["engine"]),
    ("fleet", &["engine"]),
    ("providers", &["engine", "conversation", "stream", "http"]),
    ("call", &["engine", "providers", "http", "stream"]),
];

/// Crates only the bindings may name.
const BINDINGS_ONLY: [&str; 2] = ["pyo3", "pyo3_async_runtimes"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The part a file belongs to: `src/engine/...` is `engine`, `src/fleet.rs`
/// is `fleet`.
fn part_of(src: &Path, file: &Path) -> String {
    let first = file.strip_prefix(src).unwrap().components().next().unwrap();
    let name = first.as_os_str().to_string_lossy();
    name.trim_end_matches(".rs").to_string()
}

/// A file's path from the repository's root.
fn shown(src: &Path, file: &Path) -> String {
    let root = src.parent().unwrap();
    file.strip_prefix(root).unwrap().display().to_string()
}

/// The code of a file without its comments and its test module (tests may
/// reach further: the call layer's tests use the MockServer).
fn production_code(text: &str) -> String {
    let mut code = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed == "#[cfg(test)]" && lines.peek().is_some_and(|n| n.trim() == "mod tests {") {
            break;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        code.push_str(line.split(" //").next().unwrap_or(""));
        code.push('\n');
    }
    code
}

/// The crate modules `code` names: `crate::x` paths and the first segment
/// of each name in a `use crate::{...}` group.
fn crate_modules(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // The group's top level, split by commas.
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    _ => {}
                }
                if c == ',' && depth == 0 {
                    found.insert(ident(item.trim()));
                    item.clear();
                } else {
                    item.push(c);
                }
            }
            found.insert(ident(item.trim()));
        } else {
            found.insert(ident(rest));
        }
    }
    found.remove("");
    found
}

#[test]
fn each_part_uses_only_the_modules_the_code_map_allows() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let part = part_of(&src, file);
        let Some((_, allowed)) = ALLOWED.iter().find(|(p, _)| *p == part) else {
            continue;
        };
        if file.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        checked += 1;
        let code = production_code(&fs::read_to_string(file).unwrap());
        for module in crate_modules(&code) {
            if module != part && !allowed.contains(&module.as_str()) {
                broken.push(format!("{} uses crate::{module}", shown(&src, file)));
            }
        }
    }
    assert!(
        checked > 30,
        "only {checked} files checked: is the source tree where it was?"
    );
    assert!(
        broken.is_empty(),
        "arrows the code map forbids:\n{}",
        broken.join("\n")
    );
}

#[test]
fn only_the_bindings_name_pyo3() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut broken = Vec::new();
    for file in &files {
        let part = part_of(&src, file);
        if part == "python" || part == "lib" || part == "layers" {
            continue;
        }
        let text = fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            let names_binding = BINDINGS_ONLY
                .iter()
                .any(|c| line.contains(&format!("{c}::")) || line.contains(&format!("use {c}")));
            if names_binding || line.contains("feature = \"python\"") {
                broken.push(format!("{}:{}: {}", shown(&src, file), n + 1, line.trim()));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "pyo3 outside src/python:\n{}",
        broken.join("\n")
    );
}

/// A call's waits are the engine's, through its `Clock` (`TokioClock`'s is
/// the one real sleep): a sleep anywhere else on a call's path would not be
/// seen by a manual clock, so no test could pin it. The fleet's background
/// task (reconnects, flushes) is no call's and sleeps for real.
#[test]
fn a_call_sleeps_only_through_its_clock() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let on_a_calls_path = [
        "engine",
        "call",
        "providers",
        "http",
        "stream",
        "conversation",
    ];
    let mut broken = Vec::new();
    for file in &files {
        if !on_a_calls_path.contains(&part_of(&src, file).as_str())
            || file.ends_with("src/engine/clock.rs")
            // (Test modules of their own: `tests.rs`, `room_tests.rs`.)
            || file
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n == "tests.rs" || n.ends_with("_tests.rs"))
        {
            continue;
        }
        let code = production_code(&fs::read_to_string(file).unwrap());
        for line in code.lines() {
            if ["sleep(", "sleep_until(", "interval("].iter().any(|s| {
                line.contains(&format!("time::{s}")) || line.contains(&format!("thread::{s}"))
            }) {
                broken.push(format!("{}: {}", shown(&src, file), line.trim()));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "sleeps outside the Clock:\n{}",
        broken.join("\n")
    );
}

/// The retry loop is run in one place, so every face and every kind of call
/// (whole, streamed, restarted) takes the path the call layer's tests drive.
#[test]
fn only_the_call_layer_runs_the_engine() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut runners: Vec<String> = files
        .iter()
        .filter(|file| !file.ends_with("src/layers.rs"))
        // Test modules of their own (`room_tests.rs`) are tests too.
        .filter(|file| !file.to_string_lossy().ends_with("tests.rs"))
        .filter(|file| production_code(&fs::read_to_string(file).unwrap()).contains("run_from("))
        .map(|file| shown(&src, file))
        .collect();
    runners.sort();
    // `Call::run`; the engine's own tests run it inside their test module.
    assert_eq!(runners, ["src/call/run.rs"]);
}

#[test]
fn the_module_reader_sees_grouped_and_nested_uses() {
    let code =
        "use crate::{engine::{self, Failure}, http};\nlet x = crate::stream::Usage::default();";
    let found: Vec<String> = crate_modules(code).into_iter().collect();
    assert_eq!(found, ["engine", "http", "stream"]);
}
