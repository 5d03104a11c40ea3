//! The embedded cluster's pure parts: the binaries' error, URLs, the PID file.

use super::bin_dir::first_complete_bin_dir;
use super::*;

#[test]
fn missing_binaries_name_the_package_to_install() {
    let err = first_complete_bin_dir(vec![PathBuf::from("/nonexistent/bin")])
        .expect_err("no binaries there");
    let message = err.to_string();
    assert!(message.contains("apt-get install postgresql"), "{message}");
    assert!(message.contains("--database-url"), "{message}");
}

#[test]
fn url_carries_password_only_when_set() {
    assert_eq!(
        url(None, 5, "postgres"),
        "postgres://postgres@127.0.0.1:5/postgres"
    );
    assert_eq!(
        url(Some("pw"), 6, "relayger"),
        "postgres://postgres:pw@127.0.0.1:6/relayger"
    );
}

#[test]
fn pid_file_port_is_line_four() {
    let dir = std::env::temp_dir().join(format!("relayger-pidfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(
        dir.join("postmaster.pid"),
        "123\n/data\n1700000000\n54321\n\n",
    )
    .expect("write");
    assert_eq!(read_pid_file_port(&dir), Some(54321));
    std::fs::remove_dir_all(&dir).expect("cleanup");
}
