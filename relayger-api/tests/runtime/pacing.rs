//! Failures and dead letters, the hourly budget, active hours, busy configures.

use super::*;

#[tokio::test(flavor = "multi_thread")]
async fn failures_dead_letter_at_max_attempts_and_stats_add_up() {
    let s = setup().await;
    let runtime = s.runtime("flaky", json!({"maxAttempts": 2})).await;
    s.ask("this fails").await;
    let first = s.claim_one(&runtime).await;
    let failed = s
        .finish(&runtime, &first, json!({"error": "model_unavailable", "usage": {"modelCalls": 1, "inputTokens": 10, "outputTokens": 0}}))
        .await
        .ok();
    assert_eq!(failed["outcome"], "failed");
    assert!(failed["retryAt"].is_string());
    tokio::time::sleep(Duration::from_millis(1100)).await; // the 1 s retry backoff
    let second = s.claim_one(&runtime).await;
    assert_eq!(second["attempt"], 2);
    let dead = s
        .finish(&runtime, &second, json!({"error": "model_unavailable"}))
        .await
        .ok();
    assert_eq!(dead["outcome"], "dead_letter");
    let letters = s
        .server
        .get(
            &format!("/v1/runtimes/{runtime}/dead-letters"),
            &s.agent.token,
        )
        .await
        .ok();
    assert_eq!(letters["jobs"][0]["reason"], "model_unavailable");
    assert!(
        s.claim(&runtime, 1).await.ok()["jobs"]
            .as_array()
            .expect("jobs")
            .is_empty(),
        "never revived automatically"
    );

    // A third question: answered with reported usage; a fourth: claimed and released.
    s.ask("works").await;
    let ok = s.claim_one(&runtime).await;
    s.finish(
        &runtime,
        &ok,
        json!({"reply": "fine", "usage": {"modelCalls": 2, "inputTokens": 30, "outputTokens": 7}}),
    )
    .await
    .ok();
    s.ask("released").await;
    let released = s.claim_one(&runtime).await;
    let job_path = format!(
        "/v1/runtimes/{runtime}/jobs/{}",
        released["jobId"].as_str().expect("id")
    );
    s.job_action(
        &job_path,
        "release",
        json!({"owner": released["owner"], "version": released["version"]}),
    )
    .await
    .ok();
    let again = s.claim_one(&runtime).await;
    assert_eq!(
        again["jobId"], released["jobId"],
        "released jobs are pending again at once"
    );
    assert_eq!(
        again["attempt"], 1,
        "a release does not count as an attempt"
    );

    let stats = s
        .server
        .get(&format!("/v1/runtimes/{runtime}/stats"), &s.agent.token)
        .await
        .ok();
    assert_eq!(stats["claims"], 5);
    assert_eq!(stats["attempts"], 5);
    assert_eq!(stats["finishedAttempts"], 3);
    assert_eq!(
        stats["unfinishedAttempts"], 2,
        "the released and the running attempt"
    );
    assert_eq!(stats["unreportedAttempts"], 3, "usage unknown is not zero");
    assert_eq!(
        stats["reported"],
        json!({"modelCalls": 3, "inputTokens": 40, "outputTokens": 7})
    );
    assert_eq!(stats["jobs"]["dead"], 1);

    // A manual retry revives the dead letter.
    let job_id = letters["jobs"][0]["jobId"].as_str().expect("id");
    s.server
        .post(
            &format!("/v1/runtimes/{runtime}/jobs/{job_id}/retry"),
            &s.agent.token,
            json!({}),
        )
        .await
        .ok();
    let log = s
        .server
        .get(
            &format!("/v1/runtimes/{runtime}/log?limit=500"),
            &s.agent.token,
        )
        .await
        .ok();
    let records = log["records"].as_array().expect("records");
    assert!(records.len() <= 100);
    assert_eq!(records[0]["kind"], "retried", "newest first");
    assert!(
        records
            .windows(2)
            .all(|w| w[0]["id"].as_i64() > w[1]["id"].as_i64())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_hourly_budget_leaves_work_pending_with_a_retry_time_and_configure_keeps_it() {
    let s = setup().await;
    let runtime = s.runtime("budget", json!({"maxCallsPerHour": 3})).await;
    for i in 0..5 {
        s.ask(&format!("q{i}")).await;
    }
    for _ in 0..3 {
        let job = s.claim_one(&runtime).await;
        s.finish(&runtime, &job, json!({"reply": "ok"})).await.ok();
    }
    let idle = s.claim_none(&runtime).await;
    let retry_at = idle["retryAt"]
        .as_str()
        .expect("a retry time when the budget refills");
    assert!(retry_at.ends_with('Z'));
    let configured = s
        .reconfigure(&runtime, json!({"maxCallsPerHour": 4}))
        .await
        .ok();
    assert_eq!(configured["version"], 2);
    assert_eq!(configured["jobs"]["pending"], 2, "pending jobs are kept");
    // The three units already spent still count: only one more this hour.
    let job = s.claim_one(&runtime).await;
    s.finish(&runtime, &job, json!({"reply": "ok"})).await.ok();
    s.claim_none(&runtime).await;
    // An old version is refused.
    s.configure(&runtime, json!({"version": 1, "policy": {}}))
        .await
        .err(409, "version_conflict");
}

#[tokio::test(flavor = "multi_thread")]
async fn outside_active_hours_nothing_is_claimed_and_the_retry_is_the_window_start() {
    let s = setup().await;
    // A one-minute window twelve hours away from now.
    let now = time::OffsetDateTime::now_utc();
    let start = now + time::Duration::hours(12);
    let end = start + time::Duration::minutes(1);
    let window = format!(
        "{:02}:{:02}-{:02}:{:02}",
        start.hour(),
        start.minute(),
        end.hour(),
        end.minute()
    );
    let runtime = s
        .runtime("night", json!({"activeHoursUTC": [window]}))
        .await;
    s.ask("are you awake?").await;
    let idle = s.claim_none(&runtime).await;
    let retry_at = idle["retryAt"].as_str().expect("retry at the window start");
    let expected = format!("T{:02}:{:02}:00Z", start.hour(), start.minute());
    assert!(
        retry_at.ends_with(&expected),
        "{retry_at} should end with {expected}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_active_lease_makes_configure_and_delete_busy() {
    let s = setup().await;
    let runtime = s.runtime("busy", json!({})).await;
    s.ask("hold this").await;
    let _job = s.claim_one(&runtime).await;
    s.configure(&runtime, json!({"version": 1, "policy": {}}))
        .await
        .err(409, "runtime_busy");
    s.server
        .delete(&format!("/v1/runtimes/{runtime}"), &s.agent.token)
        .await
        .err(409, "runtime_busy");
}

/// A claim that grants while another process holds a lease says when that
/// lease expires (`retryAt`), so a worker whose claim granted takes a job
/// whose owner was cut off over moments after the expiry, not at its
/// fallback poll. Its own grants are no such reason.
#[tokio::test(flavor = "multi_thread")]
async fn a_granting_claim_carries_the_earliest_expiry_of_the_other_leases() {
    use time::OffsetDateTime;
    use time::format_description::well_known::Rfc3339;

    let s = setup().await;
    let runtime = s.runtime("two-processes", json!({"concurrency": 2})).await;
    s.ask("first").await;
    let sent = OffsetDateTime::now_utc();
    let first = s.claim(&runtime, 1).await.ok();
    let received = OffsetDateTime::now_utc();
    assert_eq!(first["jobs"].as_array().expect("jobs").len(), 1, "{first}");
    assert!(
        first.get("retryAt").is_none(),
        "no other lease was active: {first}"
    );
    let lease = time::Duration::milliseconds(first["leaseMs"].as_i64().expect("leaseMs"));

    s.ask("second").await;
    let second = s.claim(&runtime, 1).await.ok();
    assert_eq!(
        second["jobs"].as_array().expect("jobs").len(),
        1,
        "{second}"
    );
    let retry_at = second["retryAt"]
        .as_str()
        .expect("a granting claim says when the other lease expires");
    let retry_at = OffsetDateTime::parse(retry_at, &Rfc3339).expect("RFC 3339");
    // The first lease's expiry, on this machine's clock (one second of
    // leeway for the database's and the test's).
    let leeway = time::Duration::seconds(1);
    assert!(
        retry_at >= sent + lease - leeway && retry_at <= received + lease + leeway,
        "{retry_at} is not the first lease's expiry ({sent} .. {received} + {lease})"
    );
}

/// A claim that grants while a failed job waits out its backoff says when
/// the backoff ends, as an idle claim would.
#[tokio::test(flavor = "multi_thread")]
async fn a_granting_claim_carries_the_end_of_a_retried_jobs_backoff() {
    use time::OffsetDateTime;
    use time::format_description::well_known::Rfc3339;

    let s = setup().await;
    let runtime = s.runtime("after-a-failure", json!({})).await;
    s.ask("fails once").await;
    let first = s.claim_one(&runtime).await;
    let failed = s
        .finish(&runtime, &first, json!({"error": "model_unavailable"}))
        .await
        .ok();
    let backoff_end = failed["retryAt"].as_str().expect("retried").to_owned();
    s.ask("a fresh question").await;
    let granting = s.claim(&runtime, 1).await.ok();
    let jobs = granting["jobs"].as_array().expect("jobs");
    assert_eq!(jobs.len(), 1, "{granting}");
    assert_ne!(jobs[0]["jobId"], first["jobId"], "still in its backoff");
    let retry_at = granting["retryAt"]
        .as_str()
        .expect("a granting claim says when the backoff ends");
    let parse = |at: &str| OffsetDateTime::parse(at, &Rfc3339).expect("RFC 3339");
    assert_eq!(parse(retry_at), parse(&backoff_end), "{granting}");
}
