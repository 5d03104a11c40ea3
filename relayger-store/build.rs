//! Fingerprints the migrations directory so that test databases are cloned
//! from a template that matches the SQL compiled into this crate, and so that
//! cargo rebuilds when a migration changes (the migrations are embedded).

use std::path::Path;

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files = Vec::new();
    collect(&dir, &mut files);
    files.sort();
    // FNV-1a over every file's relative path and content: enough to tell two
    // schema versions apart; not a security boundary.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for path in files {
        println!("cargo:rerun-if-changed={}", path.display());
        let rel = path.strip_prefix(&dir).unwrap_or(&path);
        let content = std::fs::read(&path).unwrap_or_default();
        for byte in rel.to_string_lossy().bytes().chain(content) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    println!("cargo:rustc-env=RELAYGER_MIGRATIONS_HASH={hash:016x}");
}

fn collect(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            println!("cargo:rerun-if-changed={}", path.display());
            collect(&path, out);
        } else {
            out.push(path);
        }
    }
}
