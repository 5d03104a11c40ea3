//! Running the self-managed PostgreSQL as a dedicated user when started as
//! root, without letting that user (or anyone else) steer a file operation
//! root performs.
//!
//! Root only ever touches paths nobody else can change: every directory from
//! `/` down to the data directory is owned by root and writable by no one
//! else (a world-writable directory counts only with the sticky bit, like
//! `/tmp`), and every symbolic link on the way is root's. Inside the
//! directory handed to the database user (`DATA_DIR/postgresql`), root
//! changes owners with `lchown` (never through a link), and creates a file
//! only where nothing exists (`O_CREAT | O_EXCL`, which refuses a planted
//! link or hard link) and changes its owner through the open handle.

use std::fs::{File, Metadata};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use super::{EmbeddedError, run};

/// The user PostgreSQL runs as when this process is root, and never as
/// root: PostgreSQL refuses that, and `nobody` is shared by every service
/// that drops privileges, so a cluster owned by it is theirs too.
const DEFAULT_USER: &str = "postgres";
/// The conventional uid of `nobody` (Linux and the BSDs).
const NOBODY_UID: u32 = 65_534;

/// A dedicated system user, resolved to its ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct DbUser {
    pub(super) name: String,
    pub(super) uid: u32,
    pub(super) gid: u32,
}

/// Which user PostgreSQL runs as, decided from facts alone: `None` is this
/// process's own user (not root); as root, the configured user or else
/// `postgres` when it exists. `root` and `nobody` are refused by name here
/// and by uid in [`check_db_uid`].
pub(super) fn choose_postgres_user(
    is_root: bool,
    configured: Option<&str>,
    postgres_exists: bool,
) -> Result<Option<String>, String> {
    match (is_root, configured) {
        (false, None) => Ok(None),
        (false, Some(user)) => Err(format!(
            "a PostgreSQL user (`{user}`) can only be chosen when running as root; \
             without root PostgreSQL runs as this process's own user"
        )),
        (true, Some("")) => Err("the PostgreSQL user name is empty".into()),
        (true, Some(user @ ("root" | "nobody"))) => Err(format!(
            "PostgreSQL must run as a dedicated user, not `{user}`: create one \
             (e.g. `useradd --system --home-dir /nonexistent --shell /usr/sbin/nologin relayger-pg`) \
             and pass it with --postgres-user"
        )),
        (true, Some(user)) => Ok(Some(user.to_owned())),
        (true, None) if postgres_exists => Ok(Some(DEFAULT_USER.to_owned())),
        (true, None) => Err(
            "running as root, PostgreSQL needs a dedicated user to run as, and no `postgres` user \
             exists: install the PostgreSQL server package (it creates `postgres`), create a \
             system user and pass it with --postgres-user, run as another user, or pass \
             --database-url"
                .into(),
        ),
    }
}

/// Refuses a chosen user that is root or `nobody` under another name.
pub(super) fn check_db_uid(name: &str, uid: u32) -> Result<(), String> {
    match uid {
        0 => Err(format!(
            "the PostgreSQL user `{name}` has uid 0 (root); choose a dedicated user"
        )),
        NOBODY_UID => Err(format!(
            "the PostgreSQL user `{name}` has the uid of `nobody` ({NOBODY_UID}); choose a dedicated user"
        )),
        _ => Ok(()),
    }
}

/// This process's user is root.
pub(super) fn running_as_root() -> Result<bool, EmbeddedError> {
    let output = run(Command::new("id").arg("-u"))?;
    Ok(String::from_utf8_lossy(&output.stdout).trim() == "0")
}

/// The user PostgreSQL runs as for a new start (see [`choose_postgres_user`]).
pub(super) fn postgres_user(configured: Option<&str>) -> Result<Option<DbUser>, EmbeddedError> {
    let is_root = running_as_root()?;
    let postgres_exists = is_root && configured.is_none() && lookup(DEFAULT_USER)?.is_some();
    let refused = |detail: String| EmbeddedError::PostgresUser { detail };
    let Some(name) = choose_postgres_user(is_root, configured, postgres_exists).map_err(refused)?
    else {
        return Ok(None);
    };
    let user = lookup(&name)?
        .ok_or_else(|| refused(format!("the PostgreSQL user `{name}` does not exist")))?;
    check_db_uid(&user.name, user.uid).map_err(refused)?;
    Ok(Some(user))
}

/// The user a cluster that already exists runs as: when root, the owner of
/// `owner_dir`; `None` when not root (or there is no cluster).
pub(super) fn cluster_user(owner_dir: &Path) -> Result<Option<DbUser>, EmbeddedError> {
    if !running_as_root()? {
        return Ok(None);
    }
    let Ok(meta) = std::fs::symlink_metadata(owner_dir) else {
        return Ok(None);
    };
    if meta.file_type().is_symlink() || !meta.is_dir() {
        return Err(unsafe_path(
            owner_dir,
            "is not a directory (a link is never followed)",
        ));
    }
    lookup(&meta.uid().to_string())
}

/// `id` of a user name (or numeric uid): its name and ids, `None` if unknown.
fn lookup(user: &str) -> Result<Option<DbUser>, EmbeddedError> {
    let field = |flag: &str| -> Result<Option<String>, EmbeddedError> {
        let output = run(Command::new("id").arg(flag).arg("--").arg(user))?;
        Ok(output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned()))
    };
    let (Some(name), Some(uid), Some(gid)) = (field("-nu")?, field("-u")?, field("-g")?) else {
        return Ok(None);
    };
    match (uid.parse(), gid.parse()) {
        (Ok(uid), Ok(gid)) => Ok(Some(DbUser { name, uid, gid })),
        _ => Ok(None),
    }
}

/// What `lstat` (or, for a directory behind a link, `stat`) says about one
/// existing component of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) symlink: bool,
    pub(super) dir: bool,
    pub(super) uid: u32,
    pub(super) mode: u32,
}

impl Entry {
    fn of(meta: &Metadata) -> Entry {
        Entry {
            symlink: meta.file_type().is_symlink(),
            dir: meta.is_dir(),
            uid: meta.uid(),
            mode: meta.mode(),
        }
    }
}

/// Whether root may go through `entry` on its way to the data directory:
/// a link must be root's; a directory must be root's and writable by nobody
/// else unless sticky (then others cannot rename or replace what root put
/// there); anything else is not a directory.
pub(super) fn judge(entry: Entry) -> Result<(), String> {
    if entry.symlink {
        return match entry.uid {
            0 => Ok(()),
            uid => Err(format!("is a symbolic link owned by uid {uid}, not root")),
        };
    }
    if !entry.dir {
        return Err("is not a directory".into());
    }
    if entry.uid != 0 {
        return Err(format!(
            "is owned by uid {}, not root, so that user could replace what is below it",
            entry.uid
        ));
    }
    let others_write = entry.mode & 0o022 != 0;
    let sticky = entry.mode & 0o1000 != 0;
    if others_write && !sticky {
        return Err(format!(
            "is writable by other users (mode {:o}) without the sticky bit",
            entry.mode & 0o7777
        ));
    }
    Ok(())
}

/// Checks, as root, every existing component of `path` (absolute) and of
/// the real path it resolves to with [`judge`]. Called before root creates
/// the missing part and again after, so a link planted meanwhile is caught.
pub(super) fn check_path(path: &Path) -> Result<(), EmbeddedError> {
    let mut prefix = PathBuf::new();
    for component in path.components() {
        prefix.push(component);
        if matches!(component, Component::CurDir | Component::ParentDir) {
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(&prefix) else {
            break;
        };
        let entry = Entry::of(&meta);
        if entry.symlink {
            judge(entry).map_err(|reason| unsafe_path(&prefix, &reason))?;
        }
    }
    // The deepest part that exists; what is missing, root creates itself
    // below it (and checks again afterwards).
    let existing = path
        .ancestors()
        .find(|ancestor| std::fs::symlink_metadata(ancestor).is_ok())
        .unwrap_or(Path::new("/"));
    let real = std::fs::canonicalize(existing).map_err(|source| EmbeddedError::DataDir {
        path: existing.to_path_buf(),
        source,
    })?;
    let mut prefix = PathBuf::new();
    for component in real.components() {
        prefix.push(component);
        let meta = std::fs::symlink_metadata(&prefix).map_err(|source| EmbeddedError::DataDir {
            path: prefix.clone(),
            source,
        })?;
        judge(Entry::of(&meta)).map_err(|reason| unsafe_path(&prefix, &reason))?;
    }
    Ok(())
}

/// Creates `owner_dir` (one `mkdir`, never through a link) or checks that it
/// is a real directory, and gives it to `user` with `lchown`.
pub(super) fn hand_over_dir(owner_dir: &Path, user: &DbUser) -> Result<(), EmbeddedError> {
    let io = |source| EmbeddedError::DataDir {
        path: owner_dir.to_path_buf(),
        source,
    };
    match std::fs::create_dir(owner_dir) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
            let meta = std::fs::symlink_metadata(owner_dir).map_err(io)?;
            if meta.file_type().is_symlink() || !meta.is_dir() {
                return Err(unsafe_path(
                    owner_dir,
                    "is not a directory (a link there is never followed)",
                ));
            }
        }
        Err(err) => return Err(io(err)),
    }
    std::os::unix::fs::lchown(owner_dir, Some(user.uid), Some(user.gid)).map_err(io)
}

/// Creates `path` fresh with mode 0600, owned by `owner` when given: any
/// file or link already there is removed first (`unlink` never follows a
/// link), and the create refuses anything that reappears.
pub(super) fn create_private(path: &Path, owner: Option<&DbUser>) -> Result<File, EmbeddedError> {
    let io = |source| EmbeddedError::DataDir {
        path: path.to_path_buf(),
        source,
    };
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => return Err(io(err)),
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io)?;
    if let Some(user) = owner {
        std::os::unix::fs::fchown(&file, Some(user.uid), Some(user.gid)).map_err(io)?;
    }
    Ok(file)
}

fn unsafe_path(path: &Path, reason: &str) -> EmbeddedError {
    EmbeddedError::UnsafeDataDir {
        path: path.to_path_buf(),
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_postgres_user_is_dedicated_and_never_root_or_nobody() {
        let chosen = |name: &str| Ok(Some(name.to_owned()));
        // (running as root, configured user, `postgres` exists, expected).
        type Case<'a> = (bool, Option<&'a str>, bool, Result<Option<String>, &'a str>);
        let table: [Case; 9] = [
            // Not root: PostgreSQL runs as this process's user.
            (false, None, true, Ok(None)),
            (false, None, false, Ok(None)),
            (
                false,
                Some("relayger-pg"),
                true,
                Err("only be chosen when running as root"),
            ),
            // Root: `postgres` by default, the configured user when given.
            (true, None, true, chosen("postgres")),
            (true, Some("relayger-pg"), true, chosen("relayger-pg")),
            (true, Some("relayger-pg"), false, chosen("relayger-pg")),
            // The old fallback is gone: no `postgres` and nothing configured.
            (true, None, false, Err("no `postgres` user exists")),
            (true, Some("nobody"), true, Err("not `nobody`")),
            (true, Some("root"), true, Err("not `root`")),
        ];
        for (is_root, configured, postgres_exists, expected) in table {
            let got = choose_postgres_user(is_root, configured, postgres_exists);
            match (&got, expected) {
                (Ok(got), Ok(expected)) => assert_eq!(got, &expected),
                (Err(message), Err(needle)) => assert!(message.contains(needle), "{message}"),
                _ => panic!("root {is_root}, {configured:?}, postgres {postgres_exists}: {got:?}"),
            }
        }
        assert!(choose_postgres_user(true, Some(""), true).is_err());
        assert!(
            choose_postgres_user(true, None, false)
                .expect_err("refused")
                .contains("--postgres-user")
        );
    }

    #[test]
    fn root_and_nobody_are_refused_by_uid_under_any_name() {
        assert!(check_db_uid("toor", 0).expect_err("root").contains("uid 0"));
        assert!(
            check_db_uid("nfsnobody", 65_534)
                .expect_err("nobody")
                .contains("nobody")
        );
        assert_eq!(check_db_uid("postgres", 101), Ok(()));
    }

    #[test]
    fn root_goes_only_through_links_and_directories_nobody_else_can_change() {
        let dir = |uid, mode: u32| Entry {
            symlink: false,
            dir: true,
            uid,
            mode: 0o040_000 | mode,
        };
        let link = |uid| Entry {
            symlink: true,
            dir: false,
            uid,
            mode: 0o120_777,
        };
        let table: [(&str, Entry, Option<&str>); 10] = [
            ("root's directory", dir(0, 0o755), None),
            ("root's private directory", dir(0, 0o700), None),
            ("/tmp: world-writable but sticky", dir(0, 0o1777), None),
            ("root's link", link(0), None),
            (
                "another user's link",
                link(101),
                Some("symbolic link owned by uid 101"),
            ),
            (
                "another user's directory",
                dir(101, 0o755),
                Some("owned by uid 101"),
            ),
            (
                "world-writable, not sticky",
                dir(0, 0o777),
                Some("writable by other users"),
            ),
            (
                "group-writable, not sticky",
                dir(0, 0o775),
                Some("writable by other users"),
            ),
            (
                "another user's sticky directory",
                dir(1000, 0o1777),
                Some("owned by uid 1000"),
            ),
            (
                "a file",
                Entry {
                    symlink: false,
                    dir: false,
                    uid: 0,
                    mode: 0o100_644,
                },
                Some("not a directory"),
            ),
        ];
        for (name, entry, expected) in table {
            match (judge(entry), expected) {
                (Ok(()), None) => {}
                (Err(reason), Some(needle)) => assert!(reason.contains(needle), "{name}: {reason}"),
                (got, _) => panic!("{name}: {got:?}"),
            }
        }
    }
}
