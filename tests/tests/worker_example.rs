//! The embedded worker example (`relayger-worker/examples/embedded_worker.rs`),
//! built as it ships, answers a question against a real server and
//! PostgreSQL, and stops cleanly on Ctrl-C.

use crate::cli_support;

use cli_support::{Befriended, CliTest, EVENT_TIMEOUT, stop_worker_cleanly, text};

/// `<digits> context messages, <digits> notes.`
fn is_context_summary(reply: &str) -> bool {
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    let Some(rest) = reply.strip_suffix(" notes.") else {
        return false;
    };
    let Some((messages, notes)) = rest.split_once(" context messages, ") else {
        return false;
    };
    digits(messages) && digits(notes)
}

#[test]
fn the_summary_shape_is_checked() {
    assert!(is_context_summary("1 context messages, 0 notes."));
    assert!(is_context_summary("12 context messages, 34 notes."));
    assert!(!is_context_summary(" context messages, 0 notes."));
    assert!(!is_context_summary("1 context messages, x notes."));
    assert!(!is_context_summary("1 context messages, 0 notes"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_embedded_worker_example_answers_a_question() {
    let example = relayger_tests::binary("examples/embedded_worker")
        .expect("the example is built by `cargo build --workspace --all-targets`");
    let t = CliTest::start("worker-example").await;
    let Befriended {
        receiver_number,
        room,
        ..
    } = t.befriended_pair(true);

    // RELAYGER_HOME points at the test's profiles; the argument names one.
    let path = example
        .to_str()
        .expect("a UTF-8 path")
        .replace('\'', r"'\''");
    let mut worker = t.spawn_shell(&format!("'{path}' receiver"), &[]);
    let started = worker.wait_event("started");
    assert_eq!(started["name"], "sdk-worker", "{started}");
    assert_eq!(started["from"], "now", "{started}");
    assert_eq!(
        started["agentNumber"],
        receiver_number.as_str(),
        "{started}"
    );

    let question = t.ask(&receiver_number, "how much context is there?", &[]);
    let replied = worker.wait_for(&format!("the reply to {question}"), EVENT_TIMEOUT, |e| {
        e["messageId"] == question.as_str()
            && ["replied", "skipped", "failed", "dead_letter", "handled"]
                .contains(&e["event"].as_str().unwrap_or_default())
    });
    assert_eq!(replied["event"], "replied", "{replied}");

    let thread = t.json(&[
        "--profile",
        "sender",
        "thread",
        &room,
        &question,
        "--limit",
        "100",
    ]);
    let replies: Vec<String> = thread["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["replyTo"] == question.as_str())
        .map(|m| {
            assert_eq!(m["byRuntime"], true, "{m}");
            text(&m["text"])
        })
        .collect();
    assert_eq!(replies.len(), 1, "{thread}");
    assert!(is_context_summary(&replies[0]), "{replies:?}");
    if let Some(id) = replied["replyMessageId"].as_str() {
        assert!(
            thread["messages"]
                .as_array()
                .expect("messages")
                .iter()
                .any(|m| m["messageId"] == id),
            "{replied} {thread}"
        );
    }

    stop_worker_cleanly(worker);
}
