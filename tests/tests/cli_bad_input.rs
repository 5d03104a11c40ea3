//! Every command given malformed arguments, against a live server with real
//! profiles: it exits non-zero with a clear message (the error code, or a
//! usage error), never panics, and writes nothing — neither a row in any
//! table (compared by content, not by count) nor a profile file.

use crate::cli_support;

use std::collections::BTreeMap;
use std::path::Path;

use cli_support::{
    Befriended, CliTest, Party, ServerSettings, WORKER_RUN_USAGE_ERRORS, builtin_worker_args,
    exit_status, stop_worker, text, with_flag,
};
use diesel::sql_types::Text;
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use serde_json::Value;

#[derive(diesel::QueryableByName)]
struct Name {
    #[diesel(sql_type = Text)]
    name: String,
}

#[derive(diesel::QueryableByName)]
struct Digest {
    #[diesel(sql_type = diesel::sql_types::Nullable<Text>)]
    digest: Option<String>,
}

/// Every table's whole content, as a digest per table. Any insert, update or
/// delete changes it.
async fn database_state(url: &str) -> BTreeMap<String, Option<String>> {
    let mut conn = AsyncPgConnection::establish(url).await.expect("connect");
    let tables: Vec<Name> = diesel::sql_query(
        "SELECT table_name::text AS name FROM information_schema.tables \
         WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1",
    )
    .load(&mut conn)
    .await
    .expect("tables");
    assert!(tables.len() > 10, "the schema's tables are listed");
    let mut state = BTreeMap::new();
    for table in tables {
        let digest: Digest = diesel::sql_query(format!(
            "SELECT md5(string_agg(t::text, '|' ORDER BY t::text)) AS digest FROM \"{}\" t",
            table.name
        ))
        .get_result(&mut conn)
        .await
        .expect("digest");
        state.insert(table.name, digest.digest);
    }
    state
}

/// Every file under the profile directory with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).expect("read");
                out.insert(path.display().to_string(), bytes);
            }
        }
    }
    out
}

/// How a refused command must fail.
enum Refused {
    /// The documented exit status for this error code (`error: CODE: …`;
    /// `--json`: the envelope).
    Code(&'static str),
    /// A usage error from argument parsing: exit 2.
    Usage,
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_arguments_exit_non_zero_with_a_clear_message_and_write_nothing() {
    // Two agents in contact: `receiver` runs every command, `sender` is
    // the contact and asks the question the message commands aim at.
    let (t, pair) = CliTest::with_pair("cli-bad-input", ServerSettings::default(), true).await;
    let Befriended {
        sender_number,
        receiver_number,
        room,
        ..
    } = &pair;
    let message = t.ask(receiver_number, "a question", &[]);
    t.register_number(Party::person("p", "Person"));
    // A runtime of `receiver` to aim the runtime commands at.
    let mut worker = t.spawn(&builtin_worker_args("receiver", "w", "echo"), &[]);
    let runtime = text(&worker.wait_event("started")["runtimeId"]);
    stop_worker(worker);
    // An id nothing has: runtime, message and token commands aimed at it.
    let missing = "0190a8c4-8a3e-7b6e-9f1c-3d2b1a0f9e8d";

    // The CLI runs in the test's working directory: give it whole paths.
    let file = |name: &str, content: &str| {
        let path = t.cwd().join(name);
        std::fs::write(&path, content).expect("write");
        path.display().to_string()
    };
    let zero = file("zero.json", r#"{"concurrency": 0}"#);
    let unknown = file("unknown.json", r#"{"triggers": ["everything"]}"#);
    let garbage = file("garbage.json", "not json");
    let valid = file("valid.json", r#"{"concurrency": 2}"#);
    let empty_module = file("empty.mjs", "export const nothing = 1;\n");
    let missing_file = t.cwd().join("missing.json").display().to_string();
    let big_note = "n".repeat(4001);
    // A note for the missing runtime, without its text.
    let note = vec![
        "runtimes",
        "note",
        missing,
        room.as_str(),
        "k",
        "--version",
        "0",
    ];

    let mut cases: Vec<(Vec<&str>, Refused)> = vec![
        // worker run
        (echo_worker(&["--handler", &empty_module]), Refused::Usage),
        (
            vec!["worker", "run", "w", "--handler", &missing_file],
            Refused::Code("invalid_argument"),
        ),
        (
            vec!["worker", "run", "w", "--process", &garbage],
            Refused::Code("invalid_argument"),
        ),
        (
            vec!["worker", "run", "", "--builtin", "echo"],
            Refused::Code("invalid_argument"),
        ),
        (
            vec![
                "worker",
                "run",
                "w",
                "--handler",
                &empty_module,
                "--handler-timeout",
                "120001",
            ],
            Refused::Code("invalid_argument"),
        ),
        // runtimes
        (
            vec!["runtimes", "inspect", "x y z"],
            Refused::Code("invalid_argument"),
        ),
        // A name is looked up: none of the agent's runtimes has this one.
        (
            vec!["runtimes", "inspect", "xyz"],
            Refused::Code("not_found"),
        ),
        (
            vec!["runtimes", "inspect", missing],
            Refused::Code("not_found"),
        ),
        (
            vec!["runtimes", "log", missing, "--limit", "0"],
            Refused::Code("invalid_argument"),
        ),
        (
            vec![
                "runtimes",
                "configure",
                missing,
                "--version",
                "x",
                "--policy",
                &zero,
            ],
            Refused::Usage,
        ),
        (
            vec![
                "runtimes",
                "configure",
                missing,
                "--version",
                "1",
                "--policy",
                &zero,
            ],
            Refused::Code("invalid_policy"),
        ),
        (
            [note.as_slice(), &["--sources", "foo", "--text", "hi"]].concat(),
            Refused::Code("invalid_argument"),
        ),
        (note.clone(), Refused::Usage),
        (
            [note.as_slice(), &["--text", big_note.as_str()]].concat(),
            Refused::Code("invalid_argument"),
        ),
        (
            vec!["runtimes", "notes", &runtime, room, "--limit", "0"],
            Refused::Code("invalid_argument"),
        ),
        (
            vec![
                "runtimes",
                "configure",
                &runtime,
                "--version",
                "9",
                "--policy",
                &valid,
            ],
            Refused::Code("version_conflict"),
        ),
        (
            vec!["runtimes", "retry", &runtime, missing],
            Refused::Code("not_found"),
        ),
        (
            vec!["runtimes", "inspect", &runtime, "--limit", "5"],
            Refused::Usage,
        ),
        (
            vec!["runtimes", "retry", missing, "job"],
            Refused::Code("invalid_argument"),
        ),
        (
            vec!["runtimes", "delete", "no pe"],
            Refused::Code("invalid_argument"),
        ),
        // A name is looked up: none of the agent's runtimes has this one.
        (
            vec!["runtimes", "delete", "nope"],
            Refused::Code("not_found"),
        ),
        (
            vec!["runtimes", "delete", missing],
            Refused::Code("not_found"),
        ),
        // messages
        (
            vec!["send", sender_number, ""],
            Refused::Code("invalid_argument"),
        ),
        (
            vec!["send", "12345", "hi"],
            Refused::Code("invalid_argument"),
        ),
        (vec!["send", "100999999", "hi"], Refused::Code("not_found")),
        (
            vec!["send", sender_number, "hi", "--reply-to", missing],
            Refused::Code("not_found"),
        ),
        (
            vec!["send", sender_number, "hi", "--ask", "--wait", "-3"],
            Refused::Usage,
        ),
        (vec!["message", room, missing], Refused::Code("not_found")),
        (
            vec!["thread", room, &message, "--max-bytes", "100"],
            Refused::Code("invalid_argument"),
        ),
        (
            vec!["thread", room, &message, "--limit", "101"],
            Refused::Code("invalid_argument"),
        ),
        (vec!["ack", room, "-1"], Refused::Usage),
        (vec!["ack", room, "x"], Refused::Usage),
        (vec!["ack", missing, "1"], Refused::Code("not_found")),
        // contacts and rooms
        (
            vec!["contacts", "request", receiver_number],
            Refused::Code("invalid_argument"),
        ),
        (
            vec!["contacts", "accept", "100999999"],
            Refused::Code("not_found"),
        ),
        (
            vec!["contacts", "block", "abc"],
            Refused::Code("invalid_argument"),
        ),
        (
            vec!["rooms", "create", "--name", "", "--member", sender_number],
            Refused::Code("invalid_argument"),
        ),
        (
            vec!["rooms", "create", "--name", "g", "--member", "100999999"],
            Refused::Code("not_found"),
        ),
        (
            vec!["rooms", "add", room, "x"],
            Refused::Code("invalid_argument"),
        ),
        (
            vec!["rooms", "leave", "lobby"],
            Refused::Code("invalid_argument"),
        ),
        // tokens, agents, registration
        (
            vec!["tokens", "create", "--scopes", ""],
            Refused::Code("invalid_argument"),
        ),
        (
            vec!["tokens", "create", "--scopes", "read", "--room", "lobby"],
            Refused::Code("invalid_argument"),
        ),
        (
            vec!["tokens", "revoke", missing],
            Refused::Code("not_found"),
        ),
        (
            vec!["agents", "create", "--name", "", "--save-as", "y"],
            Refused::Code("invalid_argument"),
        ),
        (
            vec!["agents", "create", "--name", "Bot", "--save-as", "../y"],
            Refused::Code("invalid_argument"),
        ),
        (
            vec!["agents", "create", "--name", "Bot", "--save-as", "x"],
            Refused::Code("forbidden"),
        ),
        (
            vec!["register", "--server", "not a url", "--name", "C"],
            Refused::Code("invalid_argument"),
        ),
        (
            vec!["register", "--server", t.url(), "--name", ""],
            Refused::Code("invalid_argument"),
        ),
    ];
    cases.extend(
        WORKER_RUN_USAGE_ERRORS
            .iter()
            .map(|args| (args.to_vec(), Refused::Usage)),
    );
    for (policy, code) in [
        (&zero, "invalid_policy"),
        (&unknown, "invalid_policy"),
        (&garbage, "invalid_policy"),
        (&missing_file, "invalid_argument"),
    ] {
        cases.push((echo_worker(&["--policy", policy]), Refused::Code(code)));
    }

    let home = t.cli.home().to_path_buf();
    let before = database_state(t.database_url()).await;
    let profiles_before = files(&home);
    // Every case is checked before failing, so one run shows them all.
    let mut problems = Vec::new();
    for (args, refused) in &cases {
        // `register` would create the named profile: aim it at a new one;
        // only a person creates agents.
        let profile = match args[..2] {
            ["register", _] => "c",
            ["agents", "create"] if args.contains(&"x") => "receiver",
            ["agents", "create"] => "p",
            _ => "receiver",
        };
        let mut full = vec!["--profile", profile];
        full.extend_from_slice(args);
        if let Err(problem) = check_refused(&t, &full, refused) {
            problems.push(format!("{full:?}: {problem}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let after = database_state(t.database_url()).await;
    for (table, digest) in &before {
        assert_eq!(
            after.get(table),
            Some(digest),
            "table `{table}` changed under refused commands"
        );
    }
    assert_eq!(after.len(), before.len());
    assert_eq!(
        files(&home),
        profiles_before,
        "refused commands wrote profile files"
    );
}

/// `worker run w --builtin echo` followed by `extra`.
fn echo_worker<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["worker", "run", "w", "--builtin", "echo"];
    args.extend_from_slice(extra);
    args
}

fn check_refused(t: &CliTest, args: &[&str], refused: &Refused) -> Result<(), String> {
    let human = t.run(args);
    if human.stderr.contains("panicked") {
        return Err(format!("panicked: {}", human.stderr));
    }
    if !human.stdout.is_empty() {
        return Err(format!("printed to stdout: {human:?}"));
    }
    let line = human.stderr.trim_end();
    match refused {
        Refused::Usage => {
            if human.code != Some(2) || !line.starts_with("error: ") {
                return Err(format!("expected a usage error (exit 2), got {human:?}"));
            }
        }
        Refused::Code(code) => {
            let prefix = format!("error: {code}: ");
            let status = exit_status(code);
            if human.code != Some(status)
                || !line.starts_with(&prefix)
                || line.len() < prefix.len() + 8
            {
                return Err(format!(
                    "expected exit {status} with `{code}`, got {human:?}"
                ));
            }
            for flag in ["--json", "--compact"] {
                let output = t.run(&with_flag(flag, args));
                let envelope: Value = serde_json::from_str(output.stderr.trim())
                    .map_err(|err| format!("{flag}: stderr is not JSON ({err}): {output:?}"))?;
                let message = envelope["error"]["message"].as_str().unwrap_or_default();
                if output.code != Some(status)
                    || !output.stdout.is_empty()
                    || envelope["error"]["code"] != *code
                    || message.is_empty()
                {
                    return Err(format!(
                        "{flag}: expected the `{code}` envelope, got {output:?}"
                    ));
                }
            }
        }
    }
    Ok(())
}
