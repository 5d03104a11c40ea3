//! Fencing under a process pause: worker A is stopped (`kill -STOP`) in the
//! middle of a job until its lease has run out; worker B of the same
//! runtime name takes the job and answers; when A continues, the server
//! refuses A's lease (409 `lease_lost`), A reports the lost lease, and the
//! room holds exactly one reply: B's.

use crate::cli_support;

use cli_support::{
    CliTest, EVENT_TIMEOUT, ServerSettings, WorkerProcess, stop_worker, text, wait_replied,
    worker_args,
};

/// The first attempt outlives any lease (its worker is paused meanwhile)
/// and stops when cancelled; a retry answers at once, naming its attempt.
const MODULE: &str = r#"export async function handle({ message, attempt, signal }) {
  if (attempt === 1) {
    await new Promise((resolve, reject) => {
      const timer = setTimeout(resolve, 60000);
      signal.addEventListener('abort', () => {
        clearTimeout(timer);
        reject(new Error('cancelled'));
      });
    });
  }
  return {
    reply: `attempt ${attempt}: ${message.text}`,
    usage: { modelCalls: 0, inputTokens: 0, outputTokens: 0 },
  };
}
"#;

const LEASE_MS: u64 = 1500;

fn worker(t: &CliTest) -> WorkerProcess {
    let mut worker = t.spawn(
        &worker_args(
            "receiver",
            "fenced-worker",
            &[
                "--from",
                "now",
                "--handler",
                "./slow-first.mjs",
                "--handler-timeout",
                "60000",
            ],
        ),
        &[],
    );
    worker.wait_event("started");
    worker
}

/// `(status, path)` of every request the server finished for `job`'s
/// heartbeat, finish or release, in order (from its request log).
fn lease_requests(t: &CliTest, job: &str) -> Vec<(u16, String)> {
    let log = std::fs::read_to_string(t.cwd().join("server.log")).unwrap_or_default();
    let marker = format!("/jobs/{job}/");
    log.lines()
        .filter(|line| line.contains(&marker) && line.contains("finished processing request"))
        .filter_map(|line| {
            let path = line.split("uri=").nth(1)?.split_whitespace().next()?;
            let status = line.split("status=").nth(1)?.split_whitespace().next()?;
            Some((status.parse().ok()?, path.to_owned()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_paused_past_its_lease_is_fenced_and_the_job_is_answered_once() {
    let (t, pair) = CliTest::with_pair(
        "worker-fencing",
        ServerSettings::lease(LEASE_MS, true),
        true,
    )
    .await;
    let (receiver_number, room) = (pair.receiver_number, pair.room);
    std::fs::write(t.cwd().join("slow-first.mjs"), MODULE).expect("write module");

    let mut a = worker(&t);
    let runtime = text(&a.seen()[0]["runtimeId"]);
    let question_id = t.ask(&receiver_number, "who answers?", &[]);
    let claimed = a.wait_for("A's claim", EVENT_TIMEOUT, |e| {
        e["event"] == "claimed" && e["messageId"] == question_id.as_str()
    });
    assert_eq!(claimed["attempt"], 1, "{claimed}");
    let job_id = text(&claimed["jobId"]);
    let job_key = text(&claimed["jobKey"]);
    // Paused mid-job: no heartbeat leaves A from now on.
    a.signal("STOP");

    // B can only get the job once A's lease has expired.
    let mut b = worker(&t);
    let retaken = b.wait_for("B's claim", EVENT_TIMEOUT, |e| {
        e["event"] == "claimed" && e["messageId"] == question_id.as_str()
    });
    assert_eq!(retaken["attempt"], 2, "{retaken}");
    assert_eq!(retaken["jobKey"], job_key.as_str(), "one job, one key");
    let replied = wait_replied(&mut b, &question_id);
    let reply_id = text(&replied["replyMessageId"]);

    a.signal("CONT");
    let fenced = a.wait_for("A's lost lease", EVENT_TIMEOUT, |e| {
        e["jobKey"] == job_key.as_str() && e["event"] != "claimed"
    });
    assert_eq!(fenced["event"], "failed", "A may not complete: {fenced}");
    assert_eq!(fenced["error"], "lease_lost", "{fenced}");

    // The server refused A's stale lease; B's heartbeats and finish passed.
    let requests = lease_requests(&t, &job_id);
    let refused: Vec<&(u16, String)> = requests
        .iter()
        .filter(|(status, _)| *status == 409)
        .collect();
    assert!(
        !refused.is_empty()
            && refused
                .iter()
                .all(|(_, path)| path.ends_with("/heartbeat") || path.ends_with("/finish")),
        "A's heartbeat or finish is refused with 409: {requests:?}"
    );
    let finished: Vec<&(u16, String)> = requests
        .iter()
        .filter(|(status, path)| *status == 200 && path.ends_with("/finish"))
        .collect();
    assert_eq!(finished.len(), 1, "only B's finish commits: {requests:?}");

    let replies = t.replies_to("sender", &room, &question_id);
    assert_eq!(replies.len(), 1, "exactly one reply: {replies:?}");
    assert_eq!(replies[0]["messageId"], reply_id.as_str(), "B's reply");
    assert_eq!(replies[0]["text"], "attempt 2: who answers?");
    let stats = t.json(&["--profile", "receiver", "runtimes", "stats", &runtime]);
    assert_eq!(stats["claims"], 2, "{stats}");
    assert_eq!(stats["unfinishedAttempts"], 1, "A's attempt: {stats}");
    assert_eq!(stats["jobs"]["handled"], 1, "{stats}");

    // A is not wedged by the pause: it stops cleanly, and never replied.
    for worker in [a, b] {
        let exit = stop_worker(worker);
        let own_reply = exit
            .events
            .iter()
            .any(|e| e["event"] == "replied" && e["replyMessageId"] != reply_id.as_str());
        assert!(!own_reply, "{:?}", exit.events);
    }
}
