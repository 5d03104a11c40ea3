//! The quick chaos soak (`relayger-soak --quick`): 300 questions while
//! workers are SIGKILLed or interrupted and PostgreSQL and the server
//! restart. The soak starts its own PostgreSQL and server and checks the
//! outcome from the database; this test runs it and reads its figures.

use relayger_tests::{assert_nothing_lost, passing_soak_figures, soak_number};

#[test]
fn the_quick_soak_loses_nothing_and_answers_nothing_twice_under_chaos() {
    // Generous: the suite runs other tests beside it on a small machine,
    // and this test is about what happens, not how fast.
    let figures = passing_soak_figures(&["--quick", "--timeout-s", "300"]);
    let number = |name: &str| soak_number(&figures, name);
    assert_eq!(number("questions"), 300);
    assert_nothing_lost(&figures);
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
    println!("{figures:#}");
}

/// The quick network soak (`relayger-soak --net --quick`, root only: it
/// makes network namespaces): PostgreSQL, two servers and five workers
/// (three Rust, two JavaScript) each in a namespace of its own, every kind
/// of network fault at least once while 300 questions flow.
#[test]
fn the_quick_network_soak_loses_nothing_under_cuts_half_open_sockets_slow_links_and_skewed_clocks()
{
    let figures = passing_soak_figures(&["--net", "--quick", "--timeout-s", "270"]);
    let number = |name: &str| soak_number(&figures, name);
    assert_eq!(number("questions"), 300);
    assert_nothing_lost(&figures);
    assert_eq!(number("attemptsBurntByInterrupt"), 0, "{figures:#}");
    let net = &figures["net"];
    let net_number = |name: &str| soak_number(net, name);
    for kind in [
        "worker_cut_past_lease",
        "worker_cut_within_lease",
        "server_cut_from_db",
        "half_open_socket",
        "slow_link",
        "clock_skew",
    ] {
        assert!(
            net["faults"][kind].as_u64() >= Some(1),
            "{kind}: {figures:#}"
        );
    }
    for zero in [
        "concurrentAttempts",
        "takeoversLate",
        "halfOpenUnnoticed",
        "dbCutsWithout503",
        "serversNotRecovered",
        "locksPastLimit",
        "slowLinkLeaseLosses",
    ] {
        assert_eq!(net_number(zero), 0, "{zero}: {figures:#}");
    }
    // A worker cut past the lease held a job: it was taken over in time.
    assert!(soak_number(&net["takeover"], "count") >= 1, "{figures:#}");
    assert!(
        soak_number(&net["takeover"], "maxMs") <= net_number("leaseMs") + 5000,
        "{figures:#}"
    );
    assert!(
        soak_number(&net["halfOpenNoticed"], "maxMs") <= 20_000,
        "{figures:#}"
    );
    for (name, least) in [
        ("rustWorkers", 3),
        ("jsWorkers", 2),
        ("rustReplies", 1),
        ("jsReplies", 1),
        ("skewedReplies", 1),
        ("otherServerRepliesDuringCuts", 1),
    ] {
        assert!(net_number(name) >= least, "{name}: {figures:#}");
    }
    println!("{figures:#}");
}

/// A server cut from PostgreSQL (its database link down silently, both
/// servers under load) answers `/healthz` with 503 during the cut and with
/// 200 within 5 s once the link is back, three times over.
#[test]
fn a_server_cut_from_postgresql_is_healthy_again_within_seconds_of_the_heal() {
    let figures = passing_soak_figures(&[
        "--net",
        "--quick",
        "--only",
        "server_cut_from_db",
        "--faults-each",
        "3",
        "--questions",
        "120",
        "--timeout-s",
        "270",
    ]);
    assert_nothing_lost(&figures);
    let net = &figures["net"];
    assert_eq!(net["faults"]["server_cut_from_db"], 3, "{figures:#}");
    assert_eq!(soak_number(net, "dbCutsWithout503"), 0, "{figures:#}");
    assert_eq!(soak_number(net, "serversNotRecovered"), 0, "{figures:#}");
    assert!(
        soak_number(&net["serverRecovery"], "maxMs") <= 5000,
        "{figures:#}"
    );
}
