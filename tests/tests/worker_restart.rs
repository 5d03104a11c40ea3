//! The runtime record persists per agent and name: a restart continues
//! where it stopped, another configuration is refused, processes of one
//! name share the work, different names are independent consumers, and a
//! server restart is ridden out.

use crate::cli_support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use cli_support::{
    CliTest, EVENT_TIMEOUT, ServerSettings, WorkerProcess, builtin_worker_args,
    builtin_worker_args_no_from, stop_worker, text, wait_replied,
};
use serde_json::Value;

struct Pair {
    t: CliTest,
    receiver_number: String,
    room: String,
}

async fn pair(label: &str) -> Pair {
    let (t, pair) = CliTest::with_pair(label, ServerSettings::lease(2000, false), true).await;
    Pair {
        t,
        receiver_number: pair.receiver_number,
        room: pair.room,
    }
}

impl Pair {
    fn ask(&self, question: &str) -> String {
        self.t.ask(&self.receiver_number, question, &[])
    }

    fn worker(&self, name: &str, builtin: &str, extra: &[&str]) -> WorkerProcess {
        let mut args = builtin_worker_args("receiver", name, builtin);
        args.extend_from_slice(extra);
        let mut worker = self.t.spawn(&args, &[]);
        worker.wait_event("started");
        worker
    }

    /// The texts of the replies to `message`.
    fn reply_texts(&self, message: &str) -> Vec<String> {
        self.t
            .replies_to("sender", &self.room, message)
            .iter()
            .map(|m| text(&m["text"]))
            .collect()
    }
}

fn replied_to(worker: &mut WorkerProcess, message: &str) {
    wait_replied(worker, message);
}

fn stop(worker: WorkerProcess) -> Vec<Value> {
    stop_worker(worker).events
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_with_the_same_name_continues_and_another_configuration_is_refused() {
    let p = pair("worker-restart").await;
    let mut worker = p.worker("reply-worker", "uppercase", &[]);
    let first = p.ask("first question");
    replied_to(&mut worker, &first);
    let runtime = text(&worker.seen()[0]["runtimeId"]);
    stop(worker);

    // Questions that arrive while no worker runs wait for it.
    let second = p.ask("second question");
    let third = p.ask("third question");
    // `--from now` again: the checkpoint is not reset.
    let mut worker = p.worker("reply-worker", "uppercase", &[]);
    assert_eq!(worker.seen()[0]["runtimeId"], runtime.as_str());
    replied_to(&mut worker, &second);
    replied_to(&mut worker, &third);
    let events = stop(worker);
    let claimed: Vec<&Value> = events.iter().filter(|e| e["event"] == "claimed").collect();
    assert_eq!(claimed.len(), 2, "nothing is handled twice: {events:?}");
    assert_eq!(p.reply_texts(&first), ["FIRST QUESTION"]);
    assert_eq!(p.reply_texts(&second), ["SECOND QUESTION"]);
    assert_eq!(p.reply_texts(&third), ["THIRD QUESTION"]);

    // Another `--from` or another policy is a configuration conflict; the
    // error shows the stored configuration.
    std::fs::write(p.t.cwd().join("policy.json"), r#"{"concurrency": 2}"#).expect("policy");
    for extra in [
        &["--from", "beginning"][..],
        &["--from", "now", "--policy", "./policy.json"][..],
    ] {
        let mut args = builtin_worker_args_no_from("receiver", "reply-worker", "uppercase");
        args.extend_from_slice(extra);
        let output =
            p.t.cli
                .command()
                .expect("command")
                .args(&args)
                .current_dir(p.t.cwd())
                .output()
                .expect("run");
        // A conflict: exit 5 (README, exit statuses).
        assert_eq!(output.status.code(), Some(5), "{output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let envelope: Value = serde_json::from_str(stderr.trim()).expect("error envelope");
        assert_eq!(envelope["error"]["code"], "runtime_configuration_conflict");
        assert_eq!(envelope["error"]["details"]["from"], "now", "{envelope}");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(!stdout.contains("\"started\""), "{stdout}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn processes_of_one_name_share_the_work_and_different_names_both_answer() {
    let p = pair("worker-share").await;
    std::fs::write(p.t.cwd().join("policy.json"), r#"{"concurrency": 2}"#).expect("policy");
    let policy = ["--policy", "./policy.json"];
    let mut shared = [
        p.worker("shared", "uppercase", &policy),
        p.worker("shared", "uppercase", &policy),
    ];
    assert_eq!(
        shared[0].seen()[0]["runtimeId"],
        shared[1].seen()[0]["runtimeId"]
    );
    let mut solo = p.worker("solo", "echo", &[]);

    let texts: Vec<String> = (0..12).map(|i| format!("question {i}")).collect();
    let questions: Vec<String> = texts.iter().map(|text| p.ask(text)).collect();
    // Every question once by "solo"…
    for question in &questions {
        replied_to(&mut solo, question);
    }
    // …and once by one of the two "shared" processes.
    let mut by_process: HashMap<String, Vec<usize>> = HashMap::new();
    let until = Instant::now() + EVENT_TIMEOUT;
    while by_process.len() < questions.len() && Instant::now() < until {
        for (index, worker) in shared.iter_mut().enumerate() {
            while let Some(event) = worker.poll_line(Duration::from_millis(20)) {
                if event["event"] == "replied" {
                    by_process
                        .entry(text(&event["messageId"]))
                        .or_default()
                        .push(index);
                }
            }
        }
    }
    for (question, asked) in questions.iter().zip(&texts) {
        let handlers = by_process.get(question).cloned().unwrap_or_default();
        assert_eq!(handlers.len(), 1, "{question}: {by_process:?}");
        let mut replies = p.reply_texts(question);
        replies.sort();
        let upper = asked.to_uppercase();
        assert_eq!(
            replies,
            [upper.as_str(), asked.as_str()],
            "one reply per runtime"
        );
    }
    println!("shared replies by process: {by_process:?}");
    let [a, b] = shared;
    for events in [stop(a), stop(b)] {
        assert!(
            events.iter().all(|e| e["event"] != "failed"),
            "no lease was fought over: {events:?}"
        );
    }
    stop(solo);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_worker_rides_out_a_server_restart() {
    let mut p = pair("worker-server-restart").await;
    let mut worker = p.worker("reply-worker", "uppercase", &[]);
    let before = p.ask("before the restart");
    replied_to(&mut worker, &before);

    p.t.restart_server();
    worker.wait_event("socket_disconnected");
    worker.wait_event("socket_connected");
    let after = p.ask("after the restart");
    replied_to(&mut worker, &after);
    assert_eq!(p.reply_texts(&after), ["AFTER THE RESTART"]);
    stop(worker);
}
