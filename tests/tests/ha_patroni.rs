//! The Patroni reference setup run for real (`scripts/ha-demo`, the files
//! of `deploy/ha/`): etcd, two Patroni members in `synchronous_mode`,
//! HAProxy routing to the leader and balancing two servers, the soak's
//! workers and askers; at 30 % of the replies the leader's Patroni and
//! PostgreSQL are SIGKILLed and Patroni promotes the other member. The
//! soak checks the outcome from the database.

use std::path::Path;
use std::process::Command;

use relayger_tests::{assert_nothing_lost_in_failover, binary, passing_figures};

#[test]
fn killing_the_patroni_leader_loses_no_committed_question_or_reply() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace");
    let mut demo = Command::new(repo.join("scripts").join("ha-demo"));
    demo.args(["--", "--quick", "--timeout-s", "300", "--json"])
        // The soak (and the binaries beside it) of this build.
        .env(
            "HA_DEMO_SOAK",
            binary("relayger-soak").expect("relayger-soak is built"),
        )
        .env_remove("HA_DEMO_KEEP");
    let figures = passing_figures(demo);
    assert_nothing_lost_in_failover(&figures);
}
