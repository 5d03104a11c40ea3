//! The quick chaos soak (`relayger-soak --quick`): 300 questions while
//! workers are SIGKILLed or interrupted and PostgreSQL and the server
//! restart. The soak starts its own PostgreSQL and server and checks the
//! outcome from the database; this test runs it and reads its figures.

use std::process::{Command, Stdio};

use relayger_tests::binary;
use serde_json::Value;

#[test]
fn the_quick_soak_loses_nothing_and_answers_nothing_twice_under_chaos() {
    let output = Command::new(binary("relayger-soak").expect("relayger-soak is built"))
        // Generous: the suite runs other tests beside it on a small machine,
        // and this test is about what happens, not how fast.
        .args(["--quick", "--json", "--timeout-s", "300"])
        .stdin(Stdio::null())
        .output()
        .expect("run relayger-soak");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let figures: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|err| panic!("no JSON figures ({err}): {stdout}\n{stderr}"));
    assert!(
        output.status.success() && figures["ok"] == true,
        "the soak failed ({:?}): {figures:#}\n{stderr}",
        output.status
    );
    let number = |name: &str| {
        figures[name]
            .as_u64()
            .unwrap_or_else(|| panic!("{name} missing: {figures}"))
    };
    assert_eq!(number("questions"), 300);
    assert_eq!(number("lost"), 0, "{figures:#}");
    assert_eq!(number("duplicateReplies"), 0, "{figures:#}");
    assert_eq!(number("staleFinishes"), 0, "{figures:#}");
    assert_eq!(number("wrongReplies"), 0, "{figures:#}");
    assert_eq!(number("checkpointRegressions"), 0, "{figures:#}");
    assert!(number("checkpointSamples") > 0, "{figures:#}");
    assert_eq!(
        number("handled") + number("deadLettered"),
        300,
        "{figures:#}"
    );
    assert!(number("kills") >= 1, "{figures:#}");
    assert!(number("interrupts") >= 1, "{figures:#}");
    assert_eq!(number("attemptsBurntByInterrupt"), 0, "{figures:#}");
    assert_eq!(number("pgRestarts"), 1, "{figures:#}");
    assert_eq!(number("serverRestarts"), 1, "{figures:#}");
    assert!(
        number("senders") >= 4 && number("workers") == 3,
        "{figures:#}"
    );
    assert_eq!(number("claims"), number("attempts"), "{figures:#}");
    assert_eq!(
        number("unfinished"),
        number("unfinishedByKill") + number("unfinishedByOutage") + number("unfinishedReleased"),
        "every unfinished attempt has a cause: {figures:#}"
    );
    assert_eq!(number("unfinishedUnexplained"), 0, "{figures:#}");
    println!("{figures:#}");
}
