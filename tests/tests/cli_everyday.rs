//! Everyday use of the `relayger` command: things by name wherever a
//! person types an id (runtimes by name, dead letters by any of their
//! three ids, direct rooms by the contact's number).

use crate::cli_support;

use cli_support::{
    CliTest, EVENT_TIMEOUT, outcome_of, stop_worker, text, write_failing_process_handler,
};
use relayger_tests::CliOutput;
use serde_json::Value;

/// `--profile receiver runtimes ARGS…`.
fn rt<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut all = vec!["--profile", "receiver", "runtimes"];
    all.extend_from_slice(args);
    all
}

/// The longest common start of two strings.
fn common_prefix(a: &str, b: &str) -> String {
    a.chars()
        .zip(b.chars())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x)
        .collect()
}

/// `text` is a table: a header row with `headers` in order, then `rows`
/// rows whose columns start where their headers do.
fn assert_table(text: &str, headers: &[&str], rows: usize) {
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), rows + 1, "{text}");
    let header = lines[0];
    let mut at = 0;
    for name in headers {
        let found = header[at..]
            .find(name)
            .unwrap_or_else(|| panic!("no {name} header: {text}"))
            + at;
        for line in &lines[1..] {
            if found > 0 {
                assert!(
                    line.len() <= found || line.as_bytes()[found - 1] == b' ',
                    "column {name} is not aligned: {text}"
                );
            }
        }
        at = found + name.len();
    }
}

/// A runtime of profile `receiver` called `name` that exists (registered by
/// a worker that started and stopped); its id.
fn register_runtime(t: &CliTest, name: &str) -> String {
    let worker = t.spawn_shell(
        &format!("relayger --profile receiver --json worker run {name} --builtin echo --from now"),
        &[],
    );
    let mut worker = worker;
    let started = worker.wait_event("started");
    stop_worker(worker);
    text(&started["runtimeId"])
}

#[tokio::test(flavor = "multi_thread")]
async fn runtimes_are_named_by_name_and_dead_letters_by_any_of_their_ids() {
    let t = CliTest::start("cli-everyday-names").await;
    let pair = t.befriended_pair(false);
    let number = pair.receiver_number.clone();

    write_failing_process_handler(t.cwd());
    let mut worker = t.spawn_shell(
        "relayger --profile receiver --json worker run reply-worker --from now \
         --process ./worker.json --policy ./policy.json",
        &[],
    );
    let runtime = text(&worker.wait_event("started")["runtimeId"]);
    let questions: Vec<String> = ["first", "second", "third"]
        .iter()
        .map(|q| t.ask(&number, q, &[]))
        .collect();
    for question in &questions {
        let dead = outcome_of(&mut worker, question);
        assert_eq!(dead["event"], "dead_letter", "{dead}");
    }
    stop_worker(worker);

    // Every `runtimes …` command takes the name as well as the id.
    let inspected = t.json(&rt(&["inspect", "reply-worker"]));
    assert_eq!(text(&inspected["id"]), runtime, "{inspected}");
    let by_prefix = t.json(&rt(&["inspect", &runtime[..13]]));
    assert_eq!(text(&by_prefix["id"]), runtime, "{by_prefix}");
    let stats = t.json(&rt(&["stats", "reply-worker"]));
    assert_eq!(stats["jobs"]["dead"], 3, "{stats}");
    let log = t.json(&rt(&["log", "reply-worker", "--limit", "5"]));
    assert!(
        !log["records"].as_array().expect("records").is_empty(),
        "{log}"
    );
    let dead = t.json(&rt(&["dead-letters", "reply-worker"]));
    let jobs = dead["jobs"].as_array().expect("jobs").clone();
    assert_eq!(jobs.len(), 3, "{dead}");
    let job_of = |question: &str| -> Value {
        jobs.iter()
            .find(|job| job["messageId"] == question)
            .cloned()
            .unwrap_or_else(|| panic!("no dead letter for {question}: {dead}"))
    };

    // Lists print as tables with headers (piped: never wrapped).
    let human = t.run(&rt(&["dead-letters", "reply-worker"]));
    assert_table(
        &human.stdout,
        &["JOB", "STATE", "ATTEMPTS", "MESSAGE", "UPDATED", "REASON"],
        3,
    );
    assert!(human.stdout.contains(&questions[0]), "{}", human.stdout);
    let human = t.run(&rt(&["list"]));
    assert_table(&human.stdout, &["NAME", "RUNTIME", "VERSION", "FROM"], 1);
    assert!(
        human
            .stdout
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("reply-worker "))
    );
    let human = t.run(&rt(&["log", "reply-worker", "--limit", "4"]));
    assert_table(
        &human.stdout,
        &["RECORD", "AT", "KIND", "MESSAGE", "DETAIL"],
        4,
    );

    // `runtimes retry` takes the jobId, the jobKey or the message id.
    let first = job_of(&questions[0]);
    let second = job_of(&questions[1]);
    let third = job_of(&questions[2]);
    for (job, typed) in [
        (&first, text(&first["jobId"])),
        (&second, text(&second["jobKey"])),
        (&third, questions[2].clone()),
    ] {
        let retried = t.json(&rt(&["retry", "reply-worker", &typed]));
        assert_eq!(retried["jobId"], job["jobId"], "{typed}: {retried}");
        assert_eq!(retried["state"], "pending", "{typed}: {retried}");
    }
    let dead = t.json(&rt(&["dead-letters", &runtime]));
    assert_eq!(
        dead["jobs"],
        serde_json::json!([]),
        "all three revived: {dead}"
    );
    // A job key of no job of this runtime is not found.
    let other_key = text(&first["jobKey"]).replace(&runtime.replace('-', ""), &"0".repeat(32));
    assert_eq!(
        t.error_code(&rt(&["retry", "reply-worker", &other_key])),
        "not_found"
    );

    // A name nobody has is not found, and the error lists the runtimes.
    let missing = t.run(&rt(&["inspect", "nobody"]));
    assert_eq!(missing.code, Some(3), "{missing:?}");
    assert!(
        missing.stderr.contains("not_found") && missing.stderr.contains("reply-worker"),
        "{missing:?}"
    );

    // Two runtimes whose ids start alike: the common start is ambiguous,
    // and the error names both.
    let other = register_runtime(&t, "open-bot");
    let prefix = common_prefix(&runtime, &other);
    assert!(
        prefix.len() >= 4,
        "UUIDv7 ids made seconds apart share a start: {runtime} {other}"
    );
    let ambiguous = t.run(&rt(&["stats", &prefix]));
    assert_eq!(ambiguous.code, Some(1), "{ambiguous:?}");
    for needle in [
        "invalid_argument",
        "reply-worker",
        "open-bot",
        &runtime,
        &other,
    ] {
        assert!(ambiguous.stderr.contains(needle), "{needle}: {ambiguous:?}");
    }
    let deleted = t.json(&rt(&["delete", "open-bot"]));
    assert_eq!(deleted["ok"], true, "{deleted}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_direct_room_is_named_by_the_contacts_number() {
    let t = CliTest::start("cli-everyday-rooms").await;
    let pair = t.befriended_pair(false);
    let (receiver, room) = (pair.receiver_number.clone(), pair.room.clone());

    let sent = t.json(&[
        "--profile",
        "sender",
        "send",
        "--room",
        &receiver,
        "by number",
    ]);
    assert_eq!(text(&sent["conversationId"]), room, "{sent}");
    let message = text(&sent["messageId"]);
    let read = t.json(&["--profile", "sender", "message", &receiver, &message]);
    assert_eq!(read["text"], "by number", "{read}");
    let thread = t.json(&[
        "--profile",
        "receiver",
        "thread",
        &pair.sender_number,
        &message,
    ]);
    assert_eq!(
        thread["messages"][0]["messageId"],
        message.as_str(),
        "{thread}"
    );
    let acked = t.json(&["--profile", "receiver", "ack", &pair.sender_number, "1"]);
    assert_eq!(text(&acked["roomId"]), room, "{acked}");

    // Tables: contacts, rooms and tokens with headers; the inbox a table
    // a room.
    let human = t.run(&["--profile", "sender", "contacts", "list"]);
    assert_table(
        &human.stdout,
        &["NUMBER", "KIND", "NAME", "ROOM", "SINCE"],
        1,
    );
    let human = t.run(&["--profile", "sender", "rooms", "list"]);
    assert_table(
        &human.stdout,
        &["ROOM", "KIND", "NAME", "MEMBERS", "LAST"],
        1,
    );
    assert!(human.stdout.contains(&room), "{}", human.stdout);
    let human = t.run(&["--profile", "sender", "tokens", "list"]);
    assert_table(&human.stdout, &["TOKEN", "SCOPES", "ROOMS", "CREATED"], 1);
    let long = "word ".repeat(40);
    t.json(&["--profile", "sender", "send", &receiver, long.trim_end()]);
    let human = t.run(&["--profile", "receiver", "inbox"]);
    let (heading, table) = human.stdout.split_once('\n').expect("a heading line");
    assert!(
        heading.starts_with(&format!("room {room} acked #1 last #2")),
        "{}",
        human.stdout
    );
    assert_table(
        table.trim_end(),
        &["SEQ", "FROM", "FLAGS", "TEXT", "MESSAGE"],
        1,
    );
    assert!(
        table.contains(long.trim_end()),
        "piped, nothing is wrapped: {table}"
    );
    // On a terminal the table fits its width: the long text wraps.
    let relayger = relayger_tests::binary("relayger").expect("relayger");
    let line = format!(
        "stty cols 72 rows 40; '{}' --profile receiver inbox",
        relayger.display()
    );
    let mut script = std::process::Command::new("script");
    script
        .args(["-qec", &line, "/dev/null"])
        .env("RELAYGER_HOME", t.cli.home())
        .env_remove("RELAYGER_PROFILE");
    let on_tty = run_command(&mut script);
    assert_eq!(on_tty.code, Some(0), "{on_tty:?}");
    let widest = on_tty
        .stdout
        .lines()
        .map(|l| l.trim_end().chars().count())
        .max();
    assert!(
        widest.is_some_and(|w| w <= 72),
        "{widest:?}: {}",
        on_tty.stdout
    );
    assert!(
        on_tty.stdout.lines().count() > 3,
        "wrapped: {}",
        on_tty.stdout
    );
    assert!(on_tty.stdout.contains("FLAGS"), "{}", on_tty.stdout);

    // A number that is not a contact has no direct room.
    let stranger = t.run(&["--profile", "sender", "message", "100999999", &message]);
    assert_eq!(stranger.code, Some(3), "{stranger:?}");
    assert!(stranger.stderr.contains("contacts list"), "{stranger:?}");
}

/// The README's exit-status table, as (status, codes named in its row).
fn documented_exit_statuses() -> Vec<(i32, Vec<String>)> {
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"),
    )
    .expect("README.md");
    let table = readme
        .split("| exit | meaning | codes |")
        .nth(1)
        .expect("the README has the exit-status table");
    table
        .lines()
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let status = cells[1].parse().expect("a status");
            let codes = cells[3]
                .split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect();
            (status, codes)
        })
        .collect()
}

/// Every exit status the README documents is the one the binary exits
/// with, for a command that fails in that way, and its error names one of
/// the row's codes; the help texts that name a status agree too.
#[tokio::test(flavor = "multi_thread")]
async fn each_documented_exit_status_is_the_real_one() {
    let t = CliTest::start("cli-everyday-exit").await;
    let pair = t.befriended_pair(false);
    let worker = t.spawn_shell(
        "relayger --profile receiver --json worker run exit-worker --builtin echo --from now",
        &[],
    );
    let mut worker = worker;
    worker.wait_event("started");
    stop_worker(worker);

    let documented = documented_exit_statuses();
    let statuses: Vec<i32> = documented.iter().map(|(status, _)| *status).collect();
    assert_eq!(statuses, (0..=8).collect::<Vec<_>>(), "{documented:?}");
    for (status, codes) in &documented {
        let out = match status {
            0 => t.run(&["--profile", "sender", "whoami"]),
            1 => t.run(&rt(&["inspect", "not a name"])),
            2 => t.run(&["--profile", "sender", "no-such-command"]),
            3 => t.run(&rt(&["inspect", "nobody"])),
            4 => {
                let mut command = t.cli.command().expect("command");
                command
                    .env("RELAYGER_SERVER", t.url())
                    .env("RELAYGER_TOKEN", "rlg_not_a_token")
                    .env_remove("RELAYGER_PROFILE")
                    .args(["whoami"]);
                run_command(&mut command)
            }
            5 => {
                std::fs::write(t.cwd().join("p.json"), "{}").expect("policy");
                let policy = t.cwd().join("p.json");
                t.run(&rt(&[
                    "configure",
                    "exit-worker",
                    "--version",
                    "9",
                    "--policy",
                    policy.to_str().expect("path"),
                ]))
            }
            6 => {
                let mut command = t.cli.command().expect("command");
                command
                    .env("RELAYGER_SERVER", "http://127.0.0.1:9")
                    .env("RELAYGER_TOKEN", "rlg_whatever")
                    .env_remove("RELAYGER_PROFILE")
                    .args(["whoami"]);
                run_command(&mut command)
            }
            7 => t.run(&[
                "--profile",
                "sender",
                "send",
                &pair.receiver_number,
                "anyone?",
                "--ask",
                "--wait",
                "1",
            ]),
            8 => {
                // A worker rejects a question whose deadline has passed.
                let mut worker = t.spawn_shell(
                    "relayger --profile receiver --json worker run exit-worker --builtin echo --from now",
                    &[],
                );
                worker.wait_event("started");
                let out = t.run(&[
                    "--profile",
                    "sender",
                    "send",
                    &pair.receiver_number,
                    "too late?",
                    "--ask",
                    "--deadline",
                    "2026-01-02T12:00:00Z",
                    "--wait",
                    "60",
                ]);
                stop_worker(worker);
                // The warning first, the error last.
                CliOutput {
                    stderr: out.stderr.lines().last().unwrap_or_default().to_owned(),
                    ..out
                }
            }
            other => panic!("no scenario for documented exit status {other}"),
        };
        assert_eq!(out.code, Some(*status), "documented {status}: {out:?}");
        if !codes.is_empty() {
            assert!(
                codes
                    .iter()
                    .any(|code| out.stderr.starts_with(&format!("error: {code}: "))),
                "exit {status} names one of {codes:?}: {out:?}"
            );
        }
    }

    // `send --help` names the status of a `--wait` that ran out.
    let help = t.run(&["send", "--help"]);
    assert!(
        help.stdout.contains("exit code 7 when none came"),
        "{}",
        help.stdout
    );
    assert!(help.stdout.contains("exit code 8"), "{}", help.stdout);
    // `runtimes configure --help` does not claim the runtime must be stopped.
    let help = t.run(&["runtimes", "configure", "--help"]);
    assert!(!help.stdout.contains("stopped runtime"), "{}", help.stdout);
    assert!(help.stdout.contains("runtime_busy"), "{}", help.stdout);
}

fn run_command(command: &mut std::process::Command) -> CliOutput {
    let output = command
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run");
    CliOutput {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// `sender` sends `message N` to `number` for each N of `range`.
fn send_numbered(t: &CliTest, number: &str, range: std::ops::RangeInclusive<u32>) {
    for n in range {
        let text = format!("message {n}");
        t.json(&["--profile", "sender", "send", number, &text]);
    }
}

/// The seqs of a history page.
fn seqs(page: &Value) -> Vec<i64> {
    page["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["seq"].as_i64().expect("seq"))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn history_pages_a_room_both_ways_and_inbox_says_what_is_left() {
    let t = CliTest::start("cli-everyday-history").await;
    let pair = t.befriended_pair(false);
    let (receiver, room) = (pair.receiver_number.clone(), pair.room.clone());
    send_numbered(&t, &receiver, 1..=20);
    let page = |extra: &[&str]| -> Value {
        let mut args = vec!["--profile", "receiver", "history", room.as_str()];
        args.extend_from_slice(extra);
        t.json(&args)
    };

    // The newest first, then back with `prev`, forward with `next`.
    let newest = page(&["--limit", "5"]);
    assert_eq!(seqs(&newest), [16, 17, 18, 19, 20], "{newest}");
    assert_eq!(newest["prev"], 16, "{newest}");
    assert_eq!(newest["next"], Value::Null, "{newest}");
    assert_eq!(newest["messages"][0]["text"], "message 16", "{newest}");
    let older = page(&["--before", "16", "--limit", "5"]);
    assert_eq!(seqs(&older), [11, 12, 13, 14, 15], "{older}");
    assert_eq!(
        (older["prev"].as_i64(), older["next"].as_i64()),
        (Some(11), Some(15))
    );
    let first = page(&["--after", "0", "--limit", "5"]);
    assert_eq!(seqs(&first), [1, 2, 3, 4, 5], "{first}");
    assert_eq!(
        (first["prev"].as_i64(), first["next"].as_i64()),
        (None, Some(5))
    );
    let between = page(&["--after", "5", "--before", "8"]);
    assert_eq!(seqs(&between), [6, 7], "{between}");
    // Acknowledged messages are still history; the room by number too.
    t.json(&["--profile", "receiver", "ack", &room, "20"]);
    let by_number = t.json(&["--profile", "receiver", "history", &pair.sender_number]);
    assert_eq!(
        seqs(&by_number),
        (1..=20).collect::<Vec<_>>(),
        "{by_number}"
    );

    // The text output tells how to go on.
    let human = t.run(&[
        "--profile",
        "receiver",
        "history",
        &room,
        "--before",
        "16",
        "--limit",
        "5",
    ]);
    assert!(human.success(), "{human:?}");
    assert!(human.stdout.starts_with("SEQ"), "{}", human.stdout);
    for hint in [
        format!("older: relayger history {room} --before 11"),
        format!("newer: relayger history {room} --after 15"),
    ] {
        assert!(human.stdout.contains(&hint), "{hint}: {}", human.stdout);
    }

    // Bad windows are refused before any request; the room is checked.
    for (args, code) in [
        (vec!["--after", "5", "--before", "5"], "invalid_argument"),
        (vec!["--limit", "101"], "invalid_argument"),
        (vec!["--limit", "0"], "invalid_argument"),
    ] {
        let mut all = vec!["--profile", "receiver", "history", room.as_str()];
        all.extend_from_slice(&args);
        assert_eq!(t.error_code(&all), code, "{args:?}");
    }
    t.register("outsider", "Outsider", false);
    assert_eq!(
        t.error_code(&["--profile", "outsider", "history", &room]),
        "not_found"
    );

    // The inbox says when more are waiting in a room, and how to read them.
    send_numbered(&t, &receiver, 21..=30);
    let inbox = t.run(&["--profile", "receiver", "inbox", "--limit", "3"]);
    assert!(inbox.success(), "{inbox:?}");
    let hint = format!("more up to #30: relayger history {room} --after 23");
    assert!(inbox.stdout.contains(&hint), "{}", inbox.stdout);
    let all = t.run(&["--profile", "receiver", "inbox"]);
    assert!(!all.stdout.contains("more up to"), "{}", all.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_starting_worker_says_what_it_will_consider() {
    let t = CliTest::start("cli-everyday-start").await;
    let pair = t.befriended_pair(false);
    let number = pair.receiver_number.clone();
    t.ask(&number, "old question one", &[]);
    t.ask(&number, "old question two", &[]);
    t.json(&["--profile", "sender", "send", &number, "just information"]);

    // Without --from (the default `beginning`), on screen: the whole
    // history of one room, three messages, and the policy in effect.
    let mut worker = t.spawn_shell(
        "relayger --profile receiver worker run history-worker --builtin echo",
        &[],
    );
    let line = worker.wait_for("the started line", EVENT_TIMEOUT, |line| {
        line.as_str()
            .is_some_and(|text| text.starts_with("started "))
    });
    let line = line.as_str().expect("text").to_owned();
    for needle in [
        "started history-worker",
        "from beginning: the rooms' whole history",
        "considers 3 new message(s) in 1 room(s) and 0 pending job(s)",
        "policy {",
        "\"maxAttempts\":3",
        "\"triggers\":[\"questions\"]",
    ] {
        assert!(line.contains(needle), "{needle}: {line}");
    }
    stop_worker(worker);

    // The same as one JSON event.
    std::fs::write(t.cwd().join("policy.json"), r#"{"concurrency": 2}"#).expect("policy");
    let mut worker = t.spawn_shell(
        "relayger --profile receiver --json worker run now-worker --builtin echo --from now --policy ./policy.json",
        &[],
    );
    let started = worker.wait_event("started");
    assert_eq!(started["from"], "now", "{started}");
    assert_eq!(started["rooms"], 1, "{started}");
    assert_eq!(started["unscannedMessages"], 0, "{started}");
    assert_eq!(started["pendingJobs"], 0, "{started}");
    assert_eq!(started["policy"]["concurrency"], 2, "{started}");
    assert_eq!(started["policy"]["maxCallsPerHour"], 60, "{started}");
    stop_worker(worker);
}

/// What `COMPLETE=fish relayger -- relayger ARGS…` offers (one candidate a
/// line, `value<TAB>help`), run as the shell's completion hook runs it;
/// without the options that are offered beside the values.
fn complete(t: &CliTest, args: &[&str]) -> Vec<String> {
    let mut command = t.cli.command().expect("command");
    command
        .env("COMPLETE", "fish")
        .env_remove("RELAYGER_PROFILE")
        .arg("--")
        .arg("relayger")
        .args(args);
    let out = run_command(&mut command);
    assert_eq!(out.code, Some(0), "{args:?}: {out:?}");
    out.stdout
        .lines()
        .map(|line| line.split('\t').next().unwrap_or_default().to_owned())
        .filter(|candidate| !candidate.starts_with('-'))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn completions_offer_profiles_runtime_names_and_room_ids() {
    let t = CliTest::start("cli-everyday-complete").await;
    let pair = t.befriended_pair(false);
    register_runtime(&t, "reply-worker");

    let profiles = complete(&t, &["--profile", ""]);
    for name in ["sender", "receiver"] {
        assert!(profiles.contains(&name.to_owned()), "{profiles:?}");
    }
    assert_eq!(complete(&t, &["--profile", "rec"]), ["receiver"]);
    let runtimes = complete(&t, &["--profile", "receiver", "runtimes", "inspect", ""]);
    assert_eq!(runtimes, ["reply-worker"], "{runtimes:?}");
    let runtimes = complete(&t, &["--profile", "receiver", "runtimes", "retry", "rep"]);
    assert_eq!(runtimes, ["reply-worker"], "{runtimes:?}");
    let rooms = complete(&t, &["--profile", "sender", "history", ""]);
    assert_eq!(rooms, std::slice::from_ref(&pair.room), "{rooms:?}");
    let rooms = complete(
        &t,
        &[
            "--profile",
            "receiver",
            "runtimes",
            "notes",
            "reply-worker",
            "",
        ],
    );
    assert_eq!(rooms, std::slice::from_ref(&pair.room), "{rooms:?}");
    // The static scripts are still there, and the dynamic one is offered.
    let mut command = t.cli.command().expect("command");
    command.env("COMPLETE", "bash");
    let script = run_command(&mut command);
    assert!(
        script.stdout.contains("_clap_complete_relayger"),
        "{script:?}"
    );
}
