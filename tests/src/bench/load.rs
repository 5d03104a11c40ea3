//! P2 (answered questions per second with four worker processes of one
//! runtime) and P5 (messages per second from 16 concurrent senders).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use relayger_core::wire::SendRequest;
use uuid::Uuid;

use super::Bench;
use super::cluster::DbProfile;
use super::procs::{CpuMark, CpuSplit, RssSampler, Worker};
use super::setup::{Ident, Identities, befriend, concurrently, group_rooms};
use super::timings::Timings;

/// The P2 policy: one runtime shared by all processes.
const P2_POLICY: &str = r#"{"concurrency":64,"maxCallsPerHour":100000}"#;

#[derive(Debug)]
pub(crate) struct P2 {
    pub(crate) questions: usize,
    pub(crate) rooms: usize,
    pub(crate) workers: usize,
    /// Worker start → last reply committed.
    pub(crate) elapsed_s: f64,
    pub(crate) answered_per_s: f64,
    pub(crate) handled: u64,
    pub(crate) skipped: u64,
    pub(crate) dead: u64,
    pub(crate) presend_s: f64,
    pub(crate) server_rss_peak_kib: u64,
    /// Route answer times and signal lags inside the server.
    pub(crate) server: Timings,
    pub(crate) cpu: CpuSplit,
    pub(crate) db: DbProfile,
}

/// P2: `questions` questions pre-sent over `rooms` rooms, then `workers`
/// processes of runtime `p2` (policy [`P2_POLICY`]) answer all of them.
pub(crate) async fn p2(
    b: &Bench,
    questions: usize,
    rooms: usize,
    workers: usize,
) -> anyhow::Result<P2> {
    let agent = b.ids.register("p2-agent", true).await?;
    let asker = b.ids.register("p2-asker", false).await?;
    befriend(&asker, &agent).await?;
    let room_ids =
        group_rooms(&asker, std::slice::from_ref(&agent.number), rooms, 16, "p2").await?;
    eprintln!("bench: p2 sending {questions} questions over {rooms} rooms");
    let presend = Instant::now();
    let client = asker.client.clone();
    let room_ids = Arc::new(room_ids);
    {
        let room_ids = Arc::clone(&room_ids);
        concurrently(questions, 16, move |i| {
            let client = client.clone();
            let room = room_ids[i % room_ids.len()];
            async move {
                client
                    .send(&SendRequest {
                        room_id: Some(room),
                        text: Some(format!("question {i}: what is the status?")),
                        ask: true,
                        ..SendRequest::default()
                    })
                    .await?;
                Ok(())
            }
        })
        .await?;
    }
    let presend_s = presend.elapsed().as_secs_f64();
    eprintln!("bench: p2 pre-send took {presend_s:.1} s; starting {workers} workers");
    let policy = b.out.join("p2-policy.json");
    std::fs::write(&policy, P2_POLICY)?;
    let policy = policy.display().to_string();
    let args = [
        "p2",
        "--builtin",
        "uppercase",
        "--from",
        "beginning",
        "--policy",
        &policy,
    ];

    let db_start = b.profile_start().await?;
    let timings_start = b.server.timings().await?;
    let cpu_start = CpuMark::take(b.server.pid(), &[], b.postmaster);
    let rss = RssSampler::start(b.server.pid(), Duration::from_millis(100));
    let start_wall = SystemTime::now();
    let started = Instant::now();
    // The first process registers the runtime; the others re-attach to it.
    let mut running = vec![Worker::spawn(
        b.ids.home(),
        &agent.name,
        &args,
        &b.out.join("p2-worker-0.log"),
    )?];
    let runtime_id: Uuid = running[0]
        .wait_started(Duration::from_secs(60))?
        .parse()
        .context("runtime id")?;
    for n in 1..workers {
        running.push(Worker::spawn(
            b.ids.home(),
            &agent.name,
            &args,
            &b.out.join(format!("p2-worker-{n}.log")),
        )?);
    }
    for worker in &running[1..] {
        worker.wait_started(Duration::from_secs(60))?;
    }
    // A stall (no job finished for this long) fails the run.
    let stall = Duration::from_secs(90);
    let mut progress = (0, Instant::now());
    let runtime = loop {
        // Each poll counts the runtime's jobs by state (a scan of its
        // jobs); the end time comes from the last reply, so polling slowly
        // costs no accuracy.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let runtime = agent.client.runtimes().get(runtime_id).await?;
        let jobs = runtime.jobs;
        let done = jobs.handled + jobs.skipped + jobs.dead;
        if done >= questions as u64 {
            break runtime;
        }
        if done > progress.0 {
            progress = (done, Instant::now());
        } else if progress.1.elapsed() > stall {
            let errors: Vec<String> = running.iter().filter_map(Worker::last_error).collect();
            bail!("p2 stalled for {stall:?}: {jobs:?}; worker errors: {errors:?}");
        }
    };
    let polled_s = started.elapsed().as_secs_f64();
    let pids: Vec<u32> = running.iter().map(Worker::pid).collect();
    let cpu = CpuMark::take(b.server.pid(), &pids, b.postmaster).since(&cpu_start);
    let server_rss_peak_kib = rss.finish();
    let server = b.server.timings().await?.since(&timings_start);
    let db = b.profile_end(db_start).await?;
    for worker in running {
        worker.stop();
    }
    // The last reply's commit time, by the same machine clock the start was
    // read from (the poll above is only accurate to its interval).
    let last = b.cluster.sql(&format!(
        "SELECT extract(epoch FROM max(created_at)) FROM messages WHERE runtime_id = '{runtime_id}'"
    ))?;
    let start_epoch = start_wall.duration_since(UNIX_EPOCH)?.as_secs_f64();
    let elapsed_s = last
        .trim()
        .parse::<f64>()
        .ok()
        .map(|end| end - start_epoch)
        .filter(|s| *s > 0.0 && *s <= polled_s + 1.0)
        .unwrap_or(polled_s);
    let answered = runtime.jobs.handled;
    Ok(P2 {
        questions,
        rooms,
        workers,
        elapsed_s,
        answered_per_s: answered as f64 / elapsed_s,
        handled: runtime.jobs.handled,
        skipped: runtime.jobs.skipped,
        dead: runtime.jobs.dead,
        presend_s,
        server_rss_peak_kib,
        server,
        cpu,
        db,
    })
}

#[derive(Debug)]
pub(crate) struct P5 {
    pub(crate) senders: usize,
    pub(crate) messages: u64,
    pub(crate) elapsed_s: f64,
    pub(crate) per_s: f64,
    /// Route answer times and signal lags inside the server.
    pub(crate) server: Timings,
    pub(crate) cpu: CpuSplit,
    pub(crate) db: DbProfile,
}

/// P5: `senders` identities, each sending plain messages into its own direct
/// room with one receiver for `secs` seconds, all at once.
pub(crate) async fn p5(b: &Bench, senders: usize, secs: u64) -> anyhow::Result<P5> {
    let receiver = b.ids.register("p5-receiver", true).await?;
    let ids: Identities = b.ids.clone();
    let pairs: Vec<(Ident, Uuid)> = {
        let receiver = receiver.clone();
        concurrently(senders, senders, move |i| {
            let ids = ids.clone();
            let receiver = receiver.clone();
            async move {
                let sender = ids.register(&format!("p5-sender-{i}"), false).await?;
                let room = befriend(&sender, &receiver).await?;
                Ok((sender, room))
            }
        })
        .await?
    };
    let count = Arc::new(AtomicU64::new(0));
    let send_all = |until: Instant, count: Arc<AtomicU64>| {
        let mut tasks = tokio::task::JoinSet::new();
        for (sender, room) in &pairs {
            let client = sender.client.clone();
            let room = *room;
            let count = Arc::clone(&count);
            tasks.spawn(async move {
                let mut n = 0u64;
                while Instant::now() < until {
                    client
                        .send(&SendRequest {
                            room_id: Some(room),
                            text: Some(format!("status report {n}: all systems nominal")),
                            ..SendRequest::default()
                        })
                        .await?;
                    n += 1;
                    count.fetch_add(1, Ordering::Relaxed);
                }
                anyhow::Ok(())
            });
        }
        tasks
    };
    // Warm-up: a second of the same load, not counted.
    let mut warm = send_all(
        Instant::now() + Duration::from_secs(1),
        Arc::new(AtomicU64::new(0)),
    );
    while let Some(result) = warm.join_next().await {
        result??;
    }
    let db_start = b.profile_start().await?;
    let timings_start = b.server.timings().await?;
    let cpu_start = CpuMark::take(b.server.pid(), &[], b.postmaster);
    let started = Instant::now();
    let mut tasks = send_all(started + Duration::from_secs(secs), Arc::clone(&count));
    while let Some(result) = tasks.join_next().await {
        result??;
    }
    let elapsed_s = started.elapsed().as_secs_f64();
    let cpu = CpuMark::take(b.server.pid(), &[], b.postmaster).since(&cpu_start);
    let server = b.server.timings().await?.since(&timings_start);
    let db = b.profile_end(db_start).await?;
    let messages = count.load(Ordering::Relaxed);
    Ok(P5 {
        senders,
        messages,
        elapsed_s,
        per_s: messages as f64 / elapsed_s,
        server,
        cpu,
        db,
    })
}
