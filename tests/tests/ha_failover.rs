//! PostgreSQL failover with nothing lost (`relayger-soak --quick
//! --failover`): a primary and a synchronous streaming standby
//! (`pg_basebackup -R`, `synchronous_standby_names`), two servers on a
//! multi-host URL with `target_session_attrs=read-write` sharing the
//! workers and askers; mid-run the primary is killed (`pg_ctl stop -m
//! immediate`) and the standby promoted. The soak checks the outcome from
//! the database.

use relayger_tests::passing_soak_figures;

#[test]
fn a_failover_to_the_synchronous_standby_loses_no_committed_question_or_reply() {
    let figures = passing_soak_figures(&["--quick", "--failover", "--timeout-s", "300"]);
    let number = |name: &str| {
        figures[name]
            .as_u64()
            .unwrap_or_else(|| panic!("{name} missing: {figures}"))
    };
    assert_eq!(number("failovers"), 1, "{figures:#}");
    assert_eq!(number("pgRestarts"), 0, "{figures:#}");
    assert!(number("recoveryMs") > 0, "{figures:#}");
    assert_eq!(number("lost"), 0, "{figures:#}");
    assert_eq!(number("duplicateReplies"), 0, "{figures:#}");
    assert_eq!(number("staleFinishes"), 0, "{figures:#}");
    assert_eq!(number("wrongReplies"), 0, "{figures:#}");
    assert_eq!(number("checkpointRegressions"), 0, "{figures:#}");
    assert!(number("checkpointSamples") > 0, "{figures:#}");
    assert_eq!(
        number("handled") + number("deadLettered"),
        number("questions"),
        "{figures:#}"
    );
    assert_eq!(number("unfinishedUnexplained"), 0, "{figures:#}");
    // The time to recover, for the record (nextest shows it with --no-capture).
    eprintln!("recovered from the failover in {} ms", number("recoveryMs"));
}
