//! ARCHITECTURE.md against the tree, and this crate's purity against its own
//! sources. Strict about what the page names (every path it spells must
//! exist), lenient about modules (a new file needs no entry, a new folder
//! or crate does).

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every file and folder of the repository below `dir`, as `/`-separated
/// paths relative to the repository, without build output and packages.
fn walk(dir: &Path, relative: &str, out: &mut Vec<(String, bool)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read a folder")
        .map(|entry| entry.expect("entry"))
        .collect();
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name == "target" || name == "node_modules" {
            continue;
        }
        let path = if relative.is_empty() {
            name.clone()
        } else {
            format!("{relative}/{name}")
        };
        let is_dir = entry.file_type().expect("file type").is_dir();
        out.push((path.clone(), is_dir));
        if is_dir {
            walk(&entry.path(), &path, out);
        }
    }
}

fn architecture() -> String {
    std::fs::read_to_string(repo().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md")
}

/// The page's inline code spans (fences dropped, so spans pair up).
fn spans(page: &str) -> Vec<String> {
    page.replace("```", "")
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// A span that names a file or folder: `a/b.rs`, `finish/sql.rs`,
/// `deploy/ha/`, `scripts/test`, `params.rs`; not a route (`/healthz`,
/// `POST …/finishes`), a package (`@relayger/sdk`), a protocol name
/// (`resources/updated`) or a build-output folder.
fn names_a_path(root: &Path, span: &str) -> bool {
    let last = span
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(span);
    let first = span.split('/').next().unwrap_or(span);
    let file_or_folder = span.ends_with('/') || last.contains('.') || root.join(first).exists();
    (span.contains('/') || span.ends_with(".rs"))
        && file_or_folder
        && !span.contains(char::is_whitespace)
        && !span.starts_with('@')
        && !span.starts_with('/')
        && !span.contains('…')
        && !span.contains("::")
        && !span.starts_with("target/")
}

#[test]
fn every_path_the_code_map_names_exists() {
    let root = repo();
    let mut tree = Vec::new();
    walk(&root, "", &mut tree);
    let mut missing = Vec::new();
    for span in spans(&architecture()) {
        if !names_a_path(&root, &span) {
            continue;
        }
        let path = span.trim_end_matches('/');
        // `dir/*.json`: the folder must exist and hold such a file.
        let (path, glob_suffix) = match path.split_once('*') {
            Some((dir, suffix)) => (dir.trim_end_matches('/'), Some(suffix)),
            None => (path, None),
        };
        // Spelled from the repository root, or from its crate or module
        // (`handlers/context.rs`, each crate's `tests/tests.rs`).
        let tail = format!("/{path}");
        let found = match glob_suffix {
            Some(suffix) => tree.iter().any(|(p, _)| {
                (p.starts_with(&format!("{path}/")) || p.contains(&format!("{tail}/")))
                    && p.ends_with(suffix)
            }),
            None => tree.iter().any(|(p, _)| p == path || p.ends_with(&tail)),
        };
        if !found {
            missing.push(span);
        }
    }
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist: {missing:?}"
    );
}

#[test]
fn every_crate_and_source_folder_is_in_the_code_map() {
    let root = repo();
    let page = architecture();
    let spans = spans(&page);
    let mentioned = |folder: &str| {
        let last = folder.rsplit('/').next().unwrap_or(folder);
        spans.iter().any(|span| {
            let span = span.trim_end_matches('/');
            [folder, last].iter().any(|name| {
                span == *name
                    || span.starts_with(&format!("{name}/"))
                    || span.contains(&format!("/{name}/"))
                    || span.ends_with(&format!("/{name}"))
            })
        })
    };
    let mut tree = Vec::new();
    walk(&root, "", &mut tree);
    let mut absent = Vec::new();
    for (path, is_dir) in &tree {
        if !is_dir || path.contains('/') || !root.join(path).join("Cargo.toml").exists() {
            continue;
        }
        if !mentioned(path) {
            absent.push(path.clone());
        }
        let src = format!("{path}/src/");
        for (inner, inner_is_dir) in &tree {
            let Some(module) = inner.strip_prefix(&src) else {
                continue;
            };
            let last = module.rsplit('/').next().unwrap_or(module);
            // Test modules and binaries are listed by what they test or run.
            if *inner_is_dir && last != "tests" && last != "bin" && !mentioned(module) {
                absent.push(inner.clone());
            }
        }
    }
    assert!(
        absent.is_empty(),
        "ARCHITECTURE.md's code map does not mention: {absent:?}"
    );
}

/// relayger-core reads nothing from outside but randomness (`random`) and
/// the clock (`Timestamp::now`), and does no I/O: the names that would do
/// either appear nowhere else in its non-test code.
#[test]
fn core_reads_randomness_and_the_clock_in_one_place_each() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut tree = Vec::new();
    walk(&src, "", &mut tree);
    let rules: [(&str, &[&str]); 17] = [
        ("SystemRandom", &["random.rs"]),
        ("OsRng", &[]),
        ("thread_rng", &[]),
        ("getrandom", &[]),
        ("new_v4", &[]),
        ("now_v7", &[]),
        ("now_utc", &["wire/time_format.rs"]),
        ("SystemTime", &[]),
        ("Instant", &[]),
        ("std::fs", &[]),
        ("std::env", &[]),
        ("TcpStream", &[]),
        ("UdpSocket", &[]),
        ("std::process", &[]),
        ("std::thread", &[]),
        ("tokio", &[]),
        ("diesel", &[]),
    ];
    let mut found = Vec::new();
    for (path, is_dir) in &tree {
        let test_file = path.split('/').any(|part| part == "tests")
            || path.ends_with("tests.rs")
            || path.ends_with("_tests.rs");
        if *is_dir || !path.ends_with(".rs") || test_file {
            continue;
        }
        let text = std::fs::read_to_string(src.join(path)).expect("read");
        let code = match text.find("#[cfg(test)]\nmod tests") {
            Some(at) => &text[..at],
            None => &text[..],
        };
        for (name, allowed) in rules {
            if code.contains(name) && !allowed.contains(&path.as_str()) {
                found.push(format!("{path}: {name}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "outside reads in relayger-core: {found:?}"
    );
}

/// The READMEs point at files that exist: every path in a code span or a
/// relative link is found from the README's folder or from the repository
/// root, and none refers to a page the repository does not hold.
#[test]
fn every_path_a_readme_names_exists() {
    let root = repo();
    let mut missing = Vec::new();
    for readme in [
        "README.md",
        "relayger-worker/README.md",
        "relayger-cli/README.md",
        "sdk/js/README.md",
    ] {
        let page = std::fs::read_to_string(root.join(readme)).expect("README");
        let folder = root.join(readme).parent().expect("folder").to_path_buf();
        let links = page.split("](").skip(1).filter_map(|rest| {
            let target = rest.split(')').next()?.split('#').next()?;
            (!target.is_empty() && !target.contains("://")).then(|| target.to_owned())
        });
        // Not URLs, variables, placeholders, home folders or the folders a
        // command creates (`./relayger-data`).
        let spans = spans(&page).into_iter().filter(|span| {
            !span.contains([':', '$', '~', '<'])
                && !span.starts_with("./")
                && (names_a_path(&root, span) || names_a_path(&folder, span))
        });
        for path in spans.chain(links) {
            let path = path.trim_end_matches('/');
            if !(root.join(path).exists() || folder.join(path).exists()) {
                missing.push(format!("{readme}: {path}"));
            }
        }
        if page.to_lowercase().contains("product page") {
            missing.push(format!(
                "{readme}: \"the product page\" is not in the repository"
            ));
        }
    }
    assert!(
        missing.is_empty(),
        "READMEs name what does not exist: {missing:?}"
    );
}
