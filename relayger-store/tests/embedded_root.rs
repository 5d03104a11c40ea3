//! The self-managed PostgreSQL as root: it runs as a dedicated user, and no
//! link planted in or above the data directory makes root change the owner
//! of (or write to) anything outside it.

use std::os::unix::fs::{MetadataExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;

use relayger_store::embedded::{ClusterMode, EmbeddedError, EmbeddedPostgres, stop_data_dir};

/// These tests check what a root process does; the suite runs as root.
fn require_root() {
    let out = Command::new("id").arg("-u").output().expect("id");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "0",
        "the embedded-PostgreSQL ownership tests check what root does: run the suite as root"
    );
}

fn id(flag: &str, user: &str) -> u32 {
    let out = Command::new("id").args([flag, user]).output().expect("id");
    assert!(
        out.status.success(),
        "the `{user}` user exists (the PostgreSQL server package creates it)"
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("numeric id")
}

/// A fresh root-owned directory (0755) for one test, under the system temp dir.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("relayger-root-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).expect("mkdir");
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    dir
}

/// A root-owned file in /etc that a planted link points at; removed on drop.
struct Victim(PathBuf);

impl Victim {
    fn file(name: &str) -> Victim {
        let path = PathBuf::from(format!("/etc/relayger-test-{name}-{}", std::process::id()));
        std::fs::write(&path, "root's own file\n").expect("write the victim");
        Victim(path)
    }

    fn dir(name: &str) -> Victim {
        let path = PathBuf::from(format!("/etc/relayger-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir(&path).expect("mkdir the victim");
        Victim(path)
    }

    /// Still root's, and (for a file) still saying what it said.
    fn assert_untouched(&self) {
        let meta = std::fs::symlink_metadata(&self.0).expect("the victim is still there");
        assert_eq!(
            (meta.uid(), meta.gid()),
            (0, 0),
            "{} changed owner",
            self.0.display()
        );
        if meta.is_file() {
            assert_eq!(
                std::fs::read_to_string(&self.0).expect("read"),
                "root's own file\n"
            );
        }
    }
}

impl Drop for Victim {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A link owned by `user`, as that user would plant it.
fn plant_link(target: &Path, link: &Path, user: &str) {
    symlink(target, link).expect("symlink");
    std::os::unix::fs::lchown(link, Some(id("-u", user)), Some(id("-g", user))).expect("lchown");
}

fn refused(result: Result<EmbeddedPostgres, EmbeddedError>) -> String {
    match result {
        Err(err @ EmbeddedError::UnsafeDataDir { .. }) => err.to_string(),
        Err(other) => panic!("expected an unsafe data directory, got {other}"),
        Ok(cluster) => {
            let _ = cluster.stop();
            panic!("the cluster started")
        }
    }
}

#[test]
fn a_cluster_directory_that_is_a_link_into_etc_is_refused_and_nothing_there_changes_owner() {
    require_root();
    let base = scratch("owner-link");
    let victim = Victim::dir("owner-link");
    let data_dir = base.join("data");
    std::fs::create_dir(&data_dir).expect("mkdir");
    // The database user replaced its own directory with a link.
    plant_link(&victim.0, &data_dir.join("postgresql"), "postgres");

    let message = refused(EmbeddedPostgres::start(&data_dir, ClusterMode::Throwaway));
    assert!(
        message.contains("postgresql") && message.contains("not a directory"),
        "{message}"
    );
    victim.assert_untouched();
    assert!(
        std::fs::read_dir(&victim.0).expect("read").next().is_none(),
        "nothing was written there"
    );
    std::fs::remove_dir_all(&base).expect("cleanup");
}

#[test]
fn a_link_on_the_data_directory_path_owned_by_another_user_is_refused() {
    require_root();
    let base = scratch("path-link");
    let real = base.join("real");
    std::fs::create_dir(&real).expect("mkdir");
    plant_link(&real, &base.join("via"), "postgres");

    let message = refused(EmbeddedPostgres::start(
        &base.join("via").join("data"),
        ClusterMode::Throwaway,
    ));
    assert!(message.contains("symbolic link owned by uid"), "{message}");
    assert!(
        !real.join("data").exists(),
        "nothing was created behind the link"
    );
    std::fs::remove_dir_all(&base).expect("cleanup");
}

#[test]
fn a_data_directory_below_one_the_database_user_owns_is_refused() {
    require_root();
    let base = scratch("owned-parent");
    let theirs = base.join("theirs");
    std::fs::create_dir(&theirs).expect("mkdir");
    std::os::unix::fs::lchown(&theirs, Some(id("-u", "postgres")), None).expect("chown");
    let message = refused(EmbeddedPostgres::start(
        &theirs.join("data"),
        ClusterMode::Throwaway,
    ));
    assert!(
        message.contains("owned by uid") && message.contains("theirs"),
        "{message}"
    );

    // A directory anyone may write to without the sticky bit: refused too.
    let open = base.join("open");
    std::fs::create_dir(&open).expect("mkdir");
    std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o777))
        .expect("chmod");
    let message = refused(EmbeddedPostgres::start(
        &open.join("data"),
        ClusterMode::Throwaway,
    ));
    assert!(message.contains("writable by other users"), "{message}");
    std::fs::remove_dir_all(&base).expect("cleanup");
}

#[test]
fn a_password_file_link_planted_by_the_database_user_is_replaced_not_followed() {
    require_root();
    let base = scratch("pwfile-link");
    let victim = Victim::file("pwfile-link");
    let data_dir = base.join("data");
    let owner_dir = data_dir.join("postgresql");
    std::fs::create_dir_all(&owner_dir).expect("mkdir");
    let (uid, gid) = (id("-u", "postgres"), id("-g", "postgres"));
    std::os::unix::fs::lchown(&owner_dir, Some(uid), Some(gid)).expect("chown");
    // Before the first start, the database user points the file root writes
    // the initial password to at a file of root's.
    plant_link(&victim.0, &owner_dir.join("initdb-pwfile"), "postgres");

    let cluster = EmbeddedPostgres::start(&data_dir, ClusterMode::Persistent).expect("start");
    victim.assert_untouched();
    assert!(
        !owner_dir.join("initdb-pwfile").exists(),
        "the password file is gone after initdb"
    );
    let meta = std::fs::symlink_metadata(&owner_dir).expect("stat");
    assert_eq!(
        (meta.uid(), meta.is_dir()),
        (uid, true),
        "the cluster runs as postgres"
    );
    cluster.stop().expect("stop");
    stop_data_dir(&data_dir).expect("stopped");
    std::fs::remove_dir_all(&base).expect("cleanup");
}

/// The server's own cluster is durable and analyzes growing tables within
/// seconds (autovacuum's default minute would leave plans made while a
/// table was empty in use meanwhile).
#[tokio::test]
async fn the_self_managed_cluster_is_durable_and_analyzes_promptly() {
    use diesel::QueryableByName;
    use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
    #[derive(QueryableByName)]
    struct Setting {
        #[diesel(sql_type = diesel::sql_types::Text)]
        value: String,
    }
    require_root();
    let base = scratch("settings");
    let data_dir = base.join("data");
    let cluster = EmbeddedPostgres::start(&data_dir, ClusterMode::Persistent).expect("start");
    let mut conn = AsyncPgConnection::establish(&cluster.maintenance_url())
        .await
        .expect("connect");
    for (name, expected) in [
        ("fsync", "on"),
        ("synchronous_commit", "on"),
        ("full_page_writes", "on"),
        ("autovacuum", "on"),
        ("autovacuum_naptime", "5s"),
        ("max_connections", "200"),
    ] {
        let setting: Setting = diesel::sql_query("SELECT current_setting($1) AS value")
            .bind::<diesel::sql_types::Text, _>(name)
            .get_result(&mut conn)
            .await
            .expect("setting");
        assert_eq!(setting.value, expected, "{name}");
    }
    drop(conn);
    cluster.stop().expect("stop");
    std::fs::remove_dir_all(&base).expect("cleanup");
}
