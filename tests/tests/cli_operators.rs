//! What operators expect of the `relayger` command: shell completions,
//! choosing and deleting profiles, profile-less runs from the environment
//! (containers), distinct exit statuses, and a visible wait on a terminal.

use crate::cli_support;

use std::process::{Command, Stdio};

use cli_support::{Befriended, CliTest, Party, text};
use relayger_tests::{CliOutput, binary};
use serde_json::Value;

fn output(command: &mut Command) -> CliOutput {
    let output = command.stdin(Stdio::null()).output().expect("run");
    CliOutput {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn envelope_code(output: &CliOutput) -> String {
    let envelope: Value = serde_json::from_str(output.stderr.trim())
        .unwrap_or_else(|err| panic!("stderr is not an envelope ({err}): {output:?}"));
    text(&envelope["error"]["code"])
}

#[test]
fn completions_are_generated_for_every_shell_and_bash_completes_subcommands() {
    let relayger = binary("relayger").expect("relayger binary");
    for shell in ["bash", "zsh", "fish", "powershell"] {
        let out = output(Command::new(&relayger).args(["completions", shell]));
        assert!(out.success(), "{shell}: {out:?}");
        for word in ["worker", "runtimes", "profiles", "completions"] {
            assert!(out.stdout.contains(word), "{shell} script lacks {word}");
        }
    }
    // Load the bash script and ask it to complete `relayger pro` and
    // `relayger profiles `.
    let script = format!(
        r#"source <("{bin}" completions bash) || exit 3
complete -p relayger || exit 4
COMP_WORDS=(relayger pro); COMP_CWORD=1; _relayger relayger pro relayger
echo "first: ${{COMPREPLY[*]}}"
COMP_WORDS=(relayger profiles ""); COMP_CWORD=2; _relayger relayger "" profiles
echo "second: ${{COMPREPLY[*]}}""#,
        bin = relayger.display()
    );
    let out = output(Command::new("bash").arg("-c").arg(script));
    assert!(out.success(), "{out:?}");
    let first = out
        .stdout
        .lines()
        .find(|l| l.starts_with("first:"))
        .expect("first");
    assert!(first.contains("profiles"), "{first}");
    let second = out
        .stdout
        .lines()
        .find(|l| l.starts_with("second:"))
        .expect("second");
    for sub in ["list", "use", "delete"] {
        assert!(second.contains(sub), "{second}");
    }
    // A bad shell is a usage error.
    let bad = output(Command::new(&relayger).args(["completions", "tcsh"]));
    assert_eq!(bad.code, Some(2), "{bad:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn profiles_use_picks_the_default_and_delete_needs_yes() {
    let t = CliTest::start("cli-profiles-use").await;
    let alice = t.register("alice", "Alice", false);
    let bob = t.register("bob", "Bob", false);

    // With no profile named and none chosen, `default` is used (absent).
    assert_eq!(t.error_code(&["whoami"]), "invalid_argument");

    let used = t.json(&["profiles", "use", "bob"]);
    assert_eq!(used["profile"], "bob", "{used}");
    assert_eq!(t.json(&["whoami"])["number"], bob["number"]);
    let listed = t.json(&["profiles", "list"]);
    let current: Vec<&Value> = listed["profiles"]
        .as_array()
        .expect("profiles")
        .iter()
        .filter(|p| p["current"] == true)
        .collect();
    assert_eq!(current.len(), 1, "{listed}");
    assert_eq!(current[0]["name"], "bob", "{listed}");
    // A named profile still wins.
    assert_eq!(
        t.json(&["--profile", "alice", "whoami"])["number"],
        alice["number"]
    );
    let mut with_env = t.cli.command().expect("command");
    with_env
        .env("RELAYGER_PROFILE", "alice")
        .args(["--json", "whoami"]);
    let out = output(&mut with_env);
    assert!(out.success(), "{out:?}");
    assert!(out.stdout.contains(&text(&alice["number"])), "{out:?}");

    // Using a profile that does not exist changes nothing.
    assert_eq!(
        t.error_code(&["profiles", "use", "carol"]),
        "invalid_argument"
    );
    assert_eq!(t.json(&["whoami"])["number"], bob["number"]);

    // Deleting needs --yes, and without it the file stays.
    assert_eq!(
        t.error_code(&["profiles", "delete", "bob"]),
        "invalid_argument"
    );
    assert!(t.cli.home().join("bob.json").exists());
    let deleted = t.json(&["profiles", "delete", "bob", "--yes"]);
    assert_eq!(deleted["deleted"], true, "{deleted}");
    assert!(!t.cli.home().join("bob.json").exists());
    // The current profile went with it: back to `default`.
    assert_eq!(t.error_code(&["whoami"]), "invalid_argument");
    assert_eq!(
        t.error_code(&["profiles", "delete", "bob", "--yes"]),
        "invalid_argument"
    );
    // Alice is untouched.
    assert_eq!(
        t.json(&["--profile", "alice", "whoami"])["number"],
        alice["number"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_without_profile_files_uses_server_token_and_secret_key_from_the_environment() {
    let t = CliTest::start("cli-env-profile").await;
    let Befriended {
        sender_number: alice_number,
        room,
        ..
    } = t.register_pair(Party::person("alice", "Alice"), Party::person("bob", "Bob"));
    let profile: Value = serde_json::from_slice(
        &std::fs::read(t.cli.home().join("alice.json")).expect("alice profile"),
    )
    .expect("profile JSON");
    let (token, secret) = (text(&profile["token"]), text(&profile["secretKey"]));

    // An empty profile directory: everything comes from the environment.
    let empty_home = t.cwd().join("empty-home");
    let env_cli = |extra: &[(&str, &str)], args: &[&str]| {
        let mut command = Command::new(binary("relayger").expect("relayger"));
        command
            .env_remove("RELAYGER_PROFILE")
            .env("RELAYGER_HOME", &empty_home)
            .env("RELAYGER_SERVER", t.url())
            .env("RELAYGER_TOKEN", &token)
            .env_remove("RELAYGER_SECRET_KEY")
            .args(args);
        for (k, v) in extra {
            command.env(k, v);
        }
        output(&mut command)
    };
    let me = env_cli(&[], &["--json", "whoami"]);
    assert!(me.success(), "{me:?}");
    let me: Value = serde_json::from_str(&me.stdout).expect("JSON");
    assert_eq!(me["number"], alice_number.as_str());

    let sent = env_cli(&[], &["--json", "send", "--room", &room, "plain from env"]);
    assert!(sent.success(), "{sent:?}");

    // Sealing needs the secret key; without it nothing is sent.
    let before = t.json(&["--profile", "bob", "inbox"]);
    let sealed = env_cli(
        &[],
        &["--json", "send", "--room", &room, "secret", "--sealed"],
    );
    assert!(!sealed.success(), "{sealed:?}");
    assert_eq!(t.json(&["--profile", "bob", "inbox"]), before);

    let with_key = [("RELAYGER_SECRET_KEY", secret.as_str())];
    let sealed = env_cli(
        &with_key,
        &["--json", "send", "--room", &room, "secret", "--sealed"],
    );
    assert!(sealed.success(), "{sealed:?}");
    let sealed: Value = serde_json::from_str(&sealed.stdout).expect("JSON");
    let opened = t.json(&[
        "--profile",
        "bob",
        "message",
        &room,
        &text(&sealed["messageId"]),
    ]);
    assert_eq!(opened["opened"]["text"], "secret", "{opened}");
    // And the env run opens it too.
    let read = env_cli(
        &with_key,
        &["--json", "message", &room, &text(&sealed["messageId"])],
    );
    assert!(read.success(), "{read:?}");
    assert!(read.stdout.contains("\"secret\""), "{read:?}");

    // Bob's key is not Alice's: refused before anything is sent.
    let bob_profile: Value =
        serde_json::from_slice(&std::fs::read(t.cli.home().join("bob.json")).expect("bob profile"))
            .expect("profile JSON");
    let wrong_key = text(&bob_profile["secretKey"]);
    let wrong = env_cli(
        &[("RELAYGER_SECRET_KEY", &wrong_key)],
        &["--json", "send", "--room", &room, "x", "--sealed"],
    );
    assert_eq!(envelope_code(&wrong), "invalid_argument", "{wrong:?}");
    assert_eq!(wrong.code, Some(1));

    // Only one of the two: a clear error.
    let mut half = Command::new(binary("relayger").expect("relayger"));
    half.env("RELAYGER_HOME", &empty_home)
        .env_remove("RELAYGER_PROFILE")
        .env_remove("RELAYGER_SERVER")
        .env("RELAYGER_TOKEN", &token)
        .args(["--json", "whoami"]);
    let half = output(&mut half);
    assert_eq!(envelope_code(&half), "invalid_argument", "{half:?}");
    assert!(half.stderr.contains("RELAYGER_SERVER"), "{half:?}");

    // A bad token: not signed in, exit 4.
    let bad = env_cli(
        &[("RELAYGER_TOKEN", "rlg_not_a_token")],
        &["--json", "whoami"],
    );
    assert_eq!(envelope_code(&bad), "unauthorized", "{bad:?}");
    assert_eq!(bad.code, Some(4), "{bad:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn exit_statuses_tell_not_found_unavailable_and_usage_apart() {
    let t = CliTest::start("cli-exit-status").await;
    t.register("alice", "Alice", false);
    let missing = uuid::Uuid::now_v7().to_string();
    let not_found = t.run(&["--profile", "alice", "message", &missing, &missing]);
    assert_eq!(not_found.code, Some(3), "{not_found:?}");
    assert!(
        not_found.stderr.starts_with("error: not_found: "),
        "{not_found:?}"
    );

    let usage = t.run(&["--profile", "alice", "send"]);
    assert_eq!(usage.code, Some(2), "{usage:?}");

    // Nothing listens on the profile's server any more.
    let mut unreachable = t.cli.command().expect("command");
    unreachable
        .env("RELAYGER_SERVER", "http://127.0.0.1:9")
        .env("RELAYGER_TOKEN", "rlg_whatever")
        .args(["whoami"]);
    let unreachable = output(&mut unreachable);
    assert_eq!(unreachable.code, Some(6), "{unreachable:?}");
    assert!(
        unreachable.stderr.starts_with("error: unavailable: "),
        "{unreachable:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn send_ask_wait_says_it_is_waiting_on_a_terminal_but_not_in_json() {
    let t = CliTest::start("cli-wait-tty").await;
    let bob_number = t
        .register_pair(Party::person("alice", "Alice"), Party::person("bob", "Bob"))
        .receiver_number;
    let relayger = binary("relayger").expect("relayger");
    // `script` gives the command a terminal.
    let on_tty = |flags: &str| {
        let line = format!(
            "'{}' --profile alice {flags} send {} 'anyone?' --ask --wait 1",
            relayger.display(),
            bob_number
        );
        let mut script = Command::new("script");
        script
            .args(["-qec", &line, "/dev/null"])
            .env("RELAYGER_HOME", t.cli.home())
            .env_remove("RELAYGER_PROFILE");
        output(&mut script)
    };
    let human = on_tty("");
    assert_eq!(human.code, Some(7), "timed out: {human:?}");
    assert!(
        human.stdout.contains("waiting up to 1 s for a reply"),
        "{human:?}"
    );
    let json = on_tty("--json");
    assert_eq!(json.code, Some(7), "{json:?}");
    assert!(!json.stdout.contains("waiting up to"), "{json:?}");
    // Without a terminal, no line either.
    let piped = t.run(&[
        "--profile",
        "alice",
        "send",
        &bob_number,
        "anyone?",
        "--ask",
        "--wait",
        "1",
    ]);
    assert_eq!(piped.code, Some(7), "{piped:?}");
    assert!(!piped.stderr.contains("waiting up to"), "{piped:?}");
}
