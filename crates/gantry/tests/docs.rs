//! The commands the README and the guide show are run, so that the docs cannot drift: in
//! every ```` ```console ```` block, each `$ gantry ...` line is run from the repository's
//! root and must exit 0 (or the code a trailing `# exits N` names), and the line printed
//! under it in the docs must be the first line the command prints. `...` in the docs stands
//! for output left out.

mod common;

use std::path::PathBuf;

use common::{gantry, repo_root, stderr, stdout};

/// A documented command: where it is, its arguments, the exit code and first line shown.
struct Documented {
    place: String,
    args: Vec<String>,
    code: i32,
    first_line: Option<String>,
}

fn documents() -> Vec<PathBuf> {
    let root = repo_root();
    let mut files = vec![root.join("README.md")];
    let mut guide: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    guide.sort();
    files.extend(guide);
    files
}

/// The commands of one document's console blocks.
fn commands(file: &PathBuf) -> Vec<Documented> {
    let text = std::fs::read_to_string(file).unwrap();
    let name = file
        .strip_prefix(repo_root())
        .unwrap_or(file)
        .display()
        .to_string();
    let mut out: Vec<Documented> = Vec::new();
    let mut in_console = false;
    let mut in_block = false;
    for (i, line) in text.lines().enumerate() {
        if let Some(tag) = line.strip_prefix("```") {
            in_console = !in_block && tag == "console";
            in_block = !in_block;
            continue;
        }
        if !in_console {
            continue;
        }
        if let Some(command) = line.strip_prefix("$ ") {
            let (command, code) = match command.split_once("  # exits ") {
                Some((command, code)) => (command, code.trim().parse().unwrap()),
                None => (command, 0),
            };
            let mut words = command.split_whitespace().map(str::to_string);
            assert_eq!(
                words.next().as_deref(),
                Some("gantry"),
                "{name}:{}: a console block runs gantry",
                i + 1
            );
            out.push(Documented {
                place: format!("{name}:{}", i + 1),
                args: words.collect(),
                code,
                first_line: None,
            });
        } else if let Some(last) = out.last_mut()
            && last.first_line.is_none()
        {
            last.first_line = Some(line.to_string());
        }
    }
    out
}

#[test]
fn every_documented_command_runs_as_documented() {
    let mut count = 0;
    let mut failures = Vec::new();
    for file in documents() {
        for c in commands(&file) {
            count += 1;
            let args: Vec<&str> = c.args.iter().map(String::as_str).collect();
            let out = gantry(&args);
            let printed = if c.code == 0 {
                stdout(&out)
            } else {
                stderr(&out)
            };
            let first = printed.lines().next().unwrap_or("");
            let line_differs = c
                .first_line
                .as_deref()
                .is_some_and(|want| want != "..." && want != first);
            if out.status.code() != Some(c.code) || line_differs {
                failures.push(format!(
                    "{}: exit {:?} (documented {}), first line {first:?} (documented {:?}); stderr: {}",
                    c.place,
                    out.status.code(),
                    c.code,
                    c.first_line,
                    stderr(&out)
                ));
            }
        }
    }
    assert!(count >= 10, "only {count} documented commands found");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The README stays a five-minute read; the rest belongs in the guide.
#[test]
fn the_readme_is_at_most_200_lines() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    assert!(
        readme.lines().count() <= 200,
        "{} lines",
        readme.lines().count()
    );
}

/// A file a newcomer can read: no source file over 1,000 lines outside tests (a module's
/// unit tests live in its own `tests.rs`).
#[test]
fn no_source_file_passes_1000_lines() {
    fn visit(dir: &std::path::Path, long: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                visit(&path, long);
            } else if path.extension().is_some_and(|e| e == "rs")
                && path.file_name().is_some_and(|n| n != "tests.rs")
            {
                let lines = std::fs::read_to_string(&path).unwrap().lines().count();
                if lines > 1000 {
                    long.push(format!("{}: {lines} lines", path.display()));
                }
            }
        }
    }
    let mut long = Vec::new();
    for krate in std::fs::read_dir(repo_root().join("crates")).unwrap() {
        let src = krate.unwrap().path().join("src");
        if src.is_dir() {
            visit(&src, &mut long);
        }
    }
    assert!(long.is_empty(), "{}", long.join("\n"));
}
