//! The CLI sends a token over plain `http://` only to this machine: to any
//! other address it refuses before a request is made, unless told to with
//! `--allow-insecure-http` or `RELAYGER_ALLOW_INSECURE_HTTP=1`.

use crate::cli_support;

use cli_support::CliTest;

#[tokio::test(flavor = "multi_thread")]
async fn tokens_go_over_plain_http_only_to_this_machine_unless_allowed() {
    let t = CliTest::start("cli-transport").await;
    // 0.0.0.0 reaches this machine's listener, but it is not a loopback
    // address: to the rule it is any other host.
    let elsewhere = t.url().replace("127.0.0.1", "0.0.0.0");
    assert_ne!(elsewhere, t.url());
    let refused_args = [
        "--profile",
        "alice",
        "register",
        "--server",
        &elsewhere,
        "--name",
        "Alice",
    ];
    let mut allowed_args = refused_args.to_vec();
    allowed_args.push("--allow-insecure-http");
    assert_eq!(t.error_code(&refused_args), "invalid_argument");
    let refused = t.run(&refused_args);
    assert!(
        refused.stderr.contains("--allow-insecure-http"),
        "{}",
        refused.stderr
    );
    assert!(
        !t.cli.home().join("alice.json").exists(),
        "nothing saved when refused"
    );

    let registered = t.json(&allowed_args);
    assert_eq!(registered["profile"], "alice", "{registered}");
    // The saved profile points elsewhere: every call needs the allowance.
    assert_eq!(
        t.error_code(&["--profile", "alice", "whoami"]),
        "invalid_argument"
    );
    t.json(&["--profile", "alice", "--allow-insecure-http", "whoami"]);
    let by_env = t.shell("RELAYGER_ALLOW_INSECURE_HTTP=1 relayger --json --profile alice whoami");
    assert!(by_env.success(), "{by_env:?}");

    // The loopback address itself needs nothing.
    t.register("bob", "Bob", false);
    t.json(&["--profile", "bob", "whoami"]);
}
