//! Claims racing for jobs, concurrency and lease fencing.

use super::*;

#[tokio::test(flavor = "multi_thread")]
async fn two_claimers_race_for_one_job_a_hundred_times() {
    let s = setup().await;
    let runtime = s.runtime("race", json!({"maxCallsPerHour": 1000})).await;
    let second_token = s
        .server
        .post(
            "/v1/tokens",
            &s.agent.token,
            json!({"scopes": ["read", "write"]}),
        )
        .await
        .ok();
    let second_token = second_token["secret"].as_str().expect("secret").to_owned();
    for round in 0..100 {
        s.ask(&format!("question {round}")).await;
        let claim = |token: String| {
            let server = s.server.clone();
            let path = format!("/v1/runtimes/{runtime}/claim");
            tokio::spawn(async move { server.post(&path, &token, json!({})).await.ok() })
        };
        let (a, b) = (claim(s.agent.token.clone()), claim(second_token.clone()));
        let (a, b) = (a.await.expect("task"), b.await.expect("task"));
        let granted: Vec<&Value> = [&a, &b]
            .iter()
            .flat_map(|r| r["jobs"].as_array().expect("jobs").iter())
            .collect();
        assert_eq!(granted.len(), 1, "round {round}: exactly one lease");
        s.finish(&runtime, granted[0], json!({"reply": "ok"}))
            .await
            .ok();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrency_two_with_four_claimers_never_exceeds_two_leases() {
    let s = setup().await;
    let runtime = s.runtime("pair", json!({"concurrency": 2})).await;
    for i in 0..10 {
        s.ask(&format!("q{i}")).await;
    }
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let server = s.server.clone();
        let token = s.agent.token.clone();
        let path = format!("/v1/runtimes/{runtime}/claim");
        tasks.push(tokio::spawn(async move {
            server.post(&path, &token, json!({"maxJobs": 2})).await.ok()
        }));
    }
    let mut granted = 0;
    for task in tasks {
        granted += task.await.expect("task")["jobs"]
            .as_array()
            .expect("jobs")
            .len();
    }
    assert_eq!(granted, 2);
    let inspect = s.inspect(&runtime).await;
    assert_eq!(inspect["activeLeases"], 2);
    assert_eq!(inspect["jobs"]["pending"], 8);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_owner_cannot_heartbeat_or_finish_and_the_next_claim_has_a_greater_version() {
    let s = setup_with(TestServer::start_with_lease(1000).await).await;
    let runtime = s.runtime("fenced", json!({})).await;
    s.ask("will you finish?").await;
    let job = s.claim_one(&runtime).await;
    let job_path = format!(
        "/v1/runtimes/{runtime}/jobs/{}",
        job["jobId"].as_str().expect("id")
    );
    let lease = json!({"owner": job["owner"], "version": job["version"]});
    s.job_action(&job_path, "heartbeat", lease.clone())
        .await
        .ok();
    // A heartbeat with a wrong owner is refused even while the lease lives.
    s.job_action(
        &job_path,
        "heartbeat",
        json!({"owner": "0".repeat(32), "version": job["version"]}),
    )
    .await
    .err(409, "lease_lost");

    // Let the lease run out (the lease itself is what is tested here).
    tokio::time::sleep(Duration::from_millis(1300)).await;
    s.job_action(&job_path, "heartbeat", lease.clone())
        .await
        .err(409, "lease_lost");
    s.finish(&runtime, &job, json!({"reply": "too late"}))
        .await
        .err(409, "lease_lost");
    let retaken = s.claim(&runtime, 1).await.ok();
    let retaken = if retaken["jobs"].as_array().expect("jobs").is_empty() {
        // The expired attempt backs off for a second before the retry.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        s.claim_one(&runtime).await
    } else {
        retaken["jobs"][0].clone()
    };
    assert!(retaken["version"].as_str().expect("v") > job["version"].as_str().expect("v"));
    assert_eq!(
        retaken["jobKey"], job["jobKey"],
        "the job key is stable across owners"
    );
    assert_eq!(retaken["attempt"], 2);
    s.finish(&runtime, &job, json!({"reply": "stale owner"}))
        .await
        .err(409, "lease_lost");
    s.finish(&runtime, &retaken, json!({"reply": "fresh owner"}))
        .await
        .ok();
    assert_eq!(s.replies().await.len(), 1);
    // Once the fresh owner has completed the job, the stale owner still
    // hears that its lease is lost, not that its result differs from the
    // job's completion.
    s.finish(&runtime, &job, json!({"reply": "stale owner"}))
        .await
        .err(409, "lease_lost");

    // configure fences an expired owner: a new question, claimed, left to expire.
    s.ask("second").await;
    let stale = s.claim_one(&runtime).await;
    tokio::time::sleep(Duration::from_millis(1300)).await;
    s.reconfigure(&runtime, json!({"concurrency": 2}))
        .await
        .ok();
    s.finish(&runtime, &stale, json!({"reply": "fenced"}))
        .await
        .err(409, "lease_lost");
}
