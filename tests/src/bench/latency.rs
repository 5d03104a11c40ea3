//! P1 (question → reply visible to the asker) and P4 (claim latency with
//! the agent in many rooms vs few).

use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use relayger_core::policy::Policy;
use relayger_core::wire::{
    ClaimRequest, FinishRequest, JobResult, RegisterRuntimeRequest, SendRequest, StartFrom,
};
use relayger_worker::{Client, SignalSocket, ThreadQuery};
use uuid::Uuid;

use super::cluster::DbProfile;
use super::procs::{CpuMark, CpuSplit, Worker};
use super::setup::{Ident, befriend, group_rooms};
use super::timings::Timings;
use super::{Bench, Summary, summarize};

/// How long one question may wait for its reply before the run fails.
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub(crate) struct P1 {
    /// Send start → reply visible, per question.
    pub(crate) latency: Summary,
    /// The `POST /v1/messages` round trip alone.
    pub(crate) send: Summary,
    /// Thread reads per question (one per wake-up signal).
    pub(crate) reads_per_question: f64,
    /// Inside the server: each route's answer time and each signal path's
    /// lag, over the measured questions.
    pub(crate) server: Timings,
    pub(crate) cpu: CpuSplit,
    pub(crate) db: DbProfile,
}

/// P1: an asker listening on its own socket asks `questions` questions one
/// after another as `send --ask --wait` does ([`ask_once`]); a `--builtin
/// uppercase` worker answers them.
pub(crate) async fn p1(b: &Bench, questions: usize) -> anyhow::Result<P1> {
    let agent = b.ids.register("p1-agent", true).await?;
    let asker = b.ids.register("p1-asker", false).await?;
    let room = befriend(&asker, &agent).await?;
    let worker = answering_worker(b, &agent, "p1")?;
    let mut socket = asker.client.socket().await.context("asker socket")?;
    // Warm-up: connections, prepared statements, caches.
    for i in 0..questions.min(50) {
        ask_once(&asker.client, &mut socket, room, i).await?;
    }
    let pids = [worker.pid()];
    let db_start = b.profile_start().await?;
    let timings_start = b.server.timings().await?;
    let cpu_start = CpuMark::take(b.server.pid(), &pids, b.postmaster);
    let mut latency = Vec::with_capacity(questions);
    let mut send = Vec::with_capacity(questions);
    let mut reads = 0usize;
    for i in 0..questions {
        let asked = ask_once(&asker.client, &mut socket, room, i).await?;
        latency.push(asked.total);
        send.push(asked.send);
        reads += asked.reads;
        if (i + 1) % 500 == 0 {
            eprintln!("bench: p1 {} / {questions}", i + 1);
        }
    }
    let cpu = CpuMark::take(b.server.pid(), &pids, b.postmaster).since(&cpu_start);
    let server = b.server.timings().await?.since(&timings_start);
    let db = b.profile_end(db_start).await?;
    if let Some(error) = worker.last_error() {
        eprintln!("bench: p1 worker reported: {error}");
    }
    worker.stop();
    Ok(P1 {
        latency: summarize(&latency),
        send: summarize(&send),
        reads_per_question: reads as f64 / questions.max(1) as f64,
        server,
        cpu,
        db,
    })
}

/// `agent`'s `--builtin uppercase` worker, runtime `name`, registered
/// `--from now` and started, with a policy that lets it answer thousands of
/// questions (the default allows 60 calls an hour); it logs to
/// `NAME-worker.log`.
pub(crate) fn answering_worker(b: &Bench, agent: &Ident, name: &str) -> anyhow::Result<Worker> {
    let policy = b.out.join(format!("{name}-policy.json"));
    std::fs::write(&policy, r#"{"maxCallsPerHour":100000}"#)?;
    let policy = policy.display().to_string();
    let worker = Worker::spawn(
        b.ids.home(),
        &agent.name,
        &[
            name,
            "--builtin",
            "uppercase",
            "--from",
            "now",
            "--policy",
            &policy,
        ],
        &b.out.join(format!("{name}-worker.log")),
    )?;
    worker.wait_started(Duration::from_secs(60))?;
    Ok(worker)
}

pub(crate) struct Asked {
    pub(crate) total: Duration,
    pub(crate) send: Duration,
    pub(crate) reads: usize,
}

/// Thread pages as `send --ask --wait` reads them (relayger-cli's
/// `commands/wait.rs`): after the question's seq, 100 messages, 64 KiB.
const PAGE_LIMIT: u32 = 100;
const PAGE_BYTES: u32 = 65_536;

/// One question as `send --ask --wait` asks it with its socket open: send,
/// then on every signal look for the reply, each look reading the thread
/// after the question's seq (following `next` while pages are full) for a
/// reply to it from someone else. The socket subscribed before the send, so
/// no look is needed before the first signal.
pub(crate) async fn ask_once(
    client: &Client,
    socket: &mut SignalSocket,
    room: Uuid,
    i: usize,
) -> anyhow::Result<Asked> {
    // Signals left over from the previous question would cost a read now.
    while let Ok(signal) = tokio::time::timeout(Duration::ZERO, socket.next_signal()).await {
        signal.context("asker socket")?;
    }
    let started = Instant::now();
    let question = client
        .send(&SendRequest {
            room_id: Some(room),
            text: Some(format!("question number {i}, please")),
            ask: true,
            ..SendRequest::default()
        })
        .await
        .context("send the question")?;
    let send = started.elapsed();
    let mut reads = 0;
    loop {
        let left = REPLY_TIMEOUT
            .checked_sub(started.elapsed())
            .ok_or_else(|| anyhow!("no reply to question {i} within {REPLY_TIMEOUT:?}"))?;
        tokio::time::timeout(left, socket.next_signal())
            .await
            .map_err(|_| anyhow!("no reply to question {i} within {REPLY_TIMEOUT:?}"))?
            .context("asker socket")?;
        let mut after = question.seq;
        loop {
            reads += 1;
            let page = client
                .thread(
                    question.conversation_id,
                    question.message_id,
                    ThreadQuery {
                        after: Some(after),
                        limit: Some(PAGE_LIMIT),
                        max_bytes: Some(PAGE_BYTES),
                    },
                )
                .await
                .context("read the thread")?;
            if page.messages.iter().any(|m| {
                m.reply_to == Some(question.message_id) && m.sender.id != question.sender.id
            }) {
                return Ok(Asked {
                    total: started.elapsed(),
                    send,
                    reads,
                });
            }
            match page.next {
                Some(next) => after = next,
                None => break,
            }
        }
    }
}

#[derive(Debug)]
pub(crate) struct P4 {
    pub(crate) rooms_small: usize,
    pub(crate) rooms_large: usize,
    pub(crate) small: Summary,
    pub(crate) large: Summary,
    /// Statements per claim+send+finish cycle in the large case.
    pub(crate) db_large: DbProfile,
    pub(crate) db_small: DbProfile,
    pub(crate) setup_s: f64,
}

/// P4: claim round trips (one fresh question per claim, so each claim scans
/// a dirty room and makes a job) for an agent in `large` rooms and one in 10.
pub(crate) async fn p4(b: &Bench, large: usize, claims: usize) -> anyhow::Result<P4> {
    let setup = Instant::now();
    let asker = b.ids.register("p4-asker", false).await?;
    let small_agent = b.ids.register("p4-small", true).await?;
    let large_agent = b.ids.register("p4-large", true).await?;
    befriend(&asker, &small_agent).await?;
    befriend(&asker, &large_agent).await?;
    let small_rooms = group_rooms(
        &asker,
        std::slice::from_ref(&small_agent.number),
        10,
        4,
        "p4s",
    )
    .await?;
    eprintln!("bench: p4 creating {large} rooms with the agent");
    let large_rooms = group_rooms(
        &asker,
        std::slice::from_ref(&large_agent.number),
        large,
        16,
        "p4l",
    )
    .await?;
    let setup_s = setup.elapsed().as_secs_f64();
    eprintln!("bench: p4 setup took {setup_s:.1} s");
    let (small, db_small) = claim_latency(b, &asker, &small_agent, &small_rooms, claims).await?;
    let (large_summary, db_large) =
        claim_latency(b, &asker, &large_agent, &large_rooms, claims).await?;
    Ok(P4 {
        rooms_small: small_rooms.len(),
        rooms_large: large_rooms.len(),
        small,
        large: large_summary,
        db_large,
        db_small,
        setup_s,
    })
}

async fn claim_latency(
    b: &Bench,
    asker: &Ident,
    agent: &Ident,
    rooms: &[Uuid],
    claims: usize,
) -> anyhow::Result<(Summary, DbProfile)> {
    let runtime = claim_runtime(agent, "p4").await?;
    let warmup = 20;
    let mut samples = Vec::with_capacity(claims);
    let mut db_start = None;
    for i in 0..warmup + claims {
        if i == warmup {
            db_start = Some(b.profile_start().await?);
        }
        // Spread the questions over the rooms (a stride coprime to most
        // room counts).
        let room = rooms[(i * 7919) % rooms.len()];
        let took = claim_cycle(asker, agent, runtime, room, i).await?;
        if i >= warmup {
            samples.push(took);
        }
    }
    let db = match db_start {
        Some(start) => b.profile_end(start).await?,
        None => DbProfile::default(),
    };
    Ok((summarize(&samples), db))
}

/// A runtime of `agent` that the bench claims for itself, registered
/// `--from now` with a budget the run cannot spend.
pub(crate) async fn claim_runtime(agent: &Ident, name: &str) -> anyhow::Result<Uuid> {
    let policy =
        Policy::parse(r#"{"maxCallsPerHour":100000}"#).map_err(|e| anyhow!("policy: {e}"))?;
    let runtime = agent
        .client
        .runtimes()
        .register(&RegisterRuntimeRequest {
            name: name.into(),
            from: StartFrom::Now,
            policy: Some(policy),
        })
        .await
        .with_context(|| format!("register the {name} runtime"))?;
    Ok(runtime.id)
}

/// One claim cycle: a fresh question into `room`, then a `maxJobs: 1` claim
/// (timed) and the finish of the job it granted.
pub(crate) async fn claim_cycle(
    asker: &Ident,
    agent: &Ident,
    runtime: Uuid,
    room: Uuid,
    i: usize,
) -> anyhow::Result<Duration> {
    let runtimes = agent.client.runtimes();
    asker
        .client
        .send(&SendRequest {
            room_id: Some(room),
            text: Some(format!("claim me {i}")),
            ask: true,
            ..SendRequest::default()
        })
        .await
        .context("send a question")?;
    let started = Instant::now();
    let claim = runtimes
        .claim(
            runtime,
            &ClaimRequest {
                max_jobs: Some(1),
                handler_timeout_ms: None,
            },
        )
        .await
        .context("claim")?;
    let took = started.elapsed();
    let Some(job) = claim.response.jobs.first() else {
        bail!("claim {i} found no job although a question was just sent");
    };
    runtimes
        .finish(
            runtime,
            job.job_id,
            &FinishRequest {
                owner: job.owner.clone(),
                version: job.version,
                result: JobResult {
                    reply: Some("ok".into()),
                    ..JobResult::default()
                },
            },
        )
        .await
        .context("finish")?;
    Ok(took)
}
