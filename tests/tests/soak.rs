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
