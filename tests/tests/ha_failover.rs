//! PostgreSQL failover with nothing lost (`relayger-soak --quick
//! --failover`): a primary and a synchronous streaming standby
//! (`pg_basebackup -R`, `synchronous_standby_names`), two servers on a
//! multi-host URL with `target_session_attrs=read-write` sharing the
//! workers and askers; mid-run the primary is killed (`pg_ctl stop -m
//! immediate`) and the standby promoted. The soak checks the outcome from
//! the database.

use relayger_tests::{assert_nothing_lost_in_failover, passing_soak_figures};

#[test]
fn a_failover_to_the_synchronous_standby_loses_no_committed_question_or_reply() {
    let figures = passing_soak_figures(&["--quick", "--failover", "--timeout-s", "300"]);
    assert_nothing_lost_in_failover(&figures);
}
