//! The growth figures: P6 (claim latency with a large backlog of pending
//! jobs vs a small one) and P7 (P1 in a room with a long history vs an
//! empty room). The two cases of each figure take turns, one sample each,
//! so both see the same machine load.
//!
//! The large fixtures are written with one set-based statement each, as
//! the rows a long-running deployment would hold (messages, their pending
//! jobs and the runtime's checkpoint past them), then `ANALYZE`d as
//! autovacuum would have by then; everything measured goes through the API.

use std::time::Instant;

use anyhow::Context;
use uuid::Uuid;

use super::cluster::DbProfile;
use super::latency::{answering_worker, ask_once, claim_cycle, claim_runtime};
use super::setup::{Ident, befriend, group_rooms};
use super::{Bench, Summary, summarize};

#[derive(Debug)]
pub(crate) struct P6 {
    pub(crate) small_backlog: usize,
    pub(crate) large_backlog: usize,
    pub(crate) small: Summary,
    pub(crate) large: Summary,
    /// Both cases together, per send+claim+finish cycle.
    pub(crate) db: DbProfile,
    pub(crate) seed_s: f64,
}

/// P6: two agents, each with a runtime holding `small` and `large` pending
/// jobs; `claims` cycles of each (a fresh question, a one-job claim, its
/// finish), so each backlog stays the same size.
pub(crate) async fn p6(b: &Bench, small: usize, large: usize, claims: usize) -> anyhow::Result<P6> {
    let asker = b.ids.register("p6-asker", false).await?;
    let mut cases = Vec::new();
    let seeding = Instant::now();
    for (label, backlog) in [("p6-small", small), ("p6-large", large)] {
        let agent = b.ids.register(label, true).await?;
        let room = befriend(&asker, &agent).await?;
        let runtime = claim_runtime(&agent, "p6").await?;
        eprintln!("bench: {label}: seeding {backlog} pending jobs");
        seed_backlog(b, &asker, room, runtime, backlog)?;
        cases.push((agent, room, runtime));
    }
    b.cluster
        .sql("ANALYZE messages, jobs, runtime_checkpoints")?;
    let seed_s = seeding.elapsed().as_secs_f64();
    eprintln!("bench: p6 seeding took {seed_s:.1} s");
    let warmup = 20;
    let mut samples = [Vec::with_capacity(claims), Vec::with_capacity(claims)];
    let mut db_start = None;
    for i in 0..warmup + claims {
        if i == warmup {
            db_start = Some(b.profile_start().await?);
        }
        for (case, (agent, room, runtime)) in cases.iter().enumerate() {
            let took = claim_cycle(&asker, agent, *runtime, *room, i).await?;
            if i >= warmup {
                samples[case].push(took);
            }
        }
    }
    let db = match db_start {
        Some(start) => b.profile_end(start).await?,
        None => DbProfile::default(),
    };
    Ok(P6 {
        small_backlog: small,
        large_backlog: large,
        small: summarize(&samples[0]),
        large: summarize(&samples[1]),
        db,
        seed_s,
    })
}

/// `count` questions from `asker` in `room`, each with a pending job of
/// `runtime`, and the runtime's checkpoint past them (as if its claims had
/// scanned them): one statement.
fn seed_backlog(
    b: &Bench,
    asker: &Ident,
    room: Uuid,
    runtime: Uuid,
    count: usize,
) -> anyhow::Result<()> {
    b.cluster
        .sql(&format!(
            "WITH r AS (SELECT last_seq FROM rooms WHERE id = '{room}'),
             m AS (
                 INSERT INTO messages (id, room_id, seq, sender_id, text, ask)
                 SELECT gen_random_uuid(), '{room}', r.last_seq + g,
                        (SELECT id FROM identities WHERE number = '{number}'),
                        'backlog question ' || g, true
                 FROM r, generate_series(1, {count}) g
                 RETURNING id, seq
             ),
             bumped AS (UPDATE rooms SET last_seq = last_seq + {count} WHERE id = '{room}'),
             queued AS (
                 INSERT INTO jobs (id, runtime_id, room_id, message_id, state)
                 SELECT gen_random_uuid(), '{runtime}', '{room}', m.id, 'pending'
                 FROM m
             )
             INSERT INTO runtime_checkpoints (runtime_id, room_id, seq)
             SELECT '{runtime}', '{room}', max(seq) FROM m HAVING count(*) > 0
             ON CONFLICT (runtime_id, room_id)
             DO UPDATE SET seq = GREATEST(runtime_checkpoints.seq, EXCLUDED.seq)",
            number = asker.number,
        ))
        .context("seed the backlog")?;
    Ok(())
}

#[derive(Debug)]
pub(crate) struct P7 {
    pub(crate) history: usize,
    pub(crate) empty: Summary,
    pub(crate) full: Summary,
    /// Thread reads per question, both rooms together.
    pub(crate) reads_per_question: f64,
    /// Both rooms together, per question.
    pub(crate) db: DbProfile,
    pub(crate) seed_s: f64,
}

/// P7: P1's questions ([`ask_once`]) in two group rooms of the same asker
/// and agent, one empty and one already holding `history` messages
/// (questions and their replies), `questions` in each.
pub(crate) async fn p7(b: &Bench, history: usize, questions: usize) -> anyhow::Result<P7> {
    let agent = b.ids.register("p7-agent", true).await?;
    let asker = b.ids.register("p7-asker", false).await?;
    befriend(&asker, &agent).await?;
    let rooms = group_rooms(&asker, std::slice::from_ref(&agent.number), 2, 1, "p7").await?;
    let (empty, full) = (rooms[0], rooms[1]);
    let seeding = Instant::now();
    eprintln!("bench: p7 seeding {history} messages");
    seed_history(b, &asker, &agent, full, history)?;
    let seed_s = seeding.elapsed().as_secs_f64();
    eprintln!("bench: p7 seeding took {seed_s:.1} s");
    // Registered after the seeding, `--from now`: the history is old news.
    let worker = answering_worker(b, &agent, "p7")?;
    let mut socket = asker.client.socket().await.context("asker socket")?;
    for i in 0..questions.min(25) {
        for room in [empty, full] {
            ask_once(&asker.client, &mut socket, room, i).await?;
        }
    }
    let db_start = b.profile_start().await?;
    let mut samples = [Vec::with_capacity(questions), Vec::with_capacity(questions)];
    let mut reads = 0;
    for i in 0..questions {
        for (case, room) in [empty, full].into_iter().enumerate() {
            let asked = ask_once(&asker.client, &mut socket, room, i).await?;
            samples[case].push(asked.total);
            reads += asked.reads;
        }
        if (i + 1) % 250 == 0 {
            eprintln!("bench: p7 {} / {questions}", i + 1);
        }
    }
    let db = b.profile_end(db_start).await?;
    if let Some(error) = worker.last_error() {
        eprintln!("bench: p7 worker reported: {error}");
    }
    worker.stop();
    Ok(P7 {
        history,
        empty: summarize(&samples[0]),
        full: summarize(&samples[1]),
        reads_per_question: reads as f64 / (2 * questions).max(1) as f64,
        db,
        seed_s,
    })
}

/// `count` messages in `room`: the asker's questions, each answered by the
/// agent's reply (odd seqs ask, even seqs reply to the one before): one
/// statement, then `ANALYZE`.
fn seed_history(
    b: &Bench,
    asker: &Ident,
    agent: &Ident,
    room: Uuid,
    count: usize,
) -> anyhow::Result<()> {
    b.cluster
        .sql(&format!(
            "WITH r AS (SELECT last_seq FROM rooms WHERE id = '{room}'),
             a AS (SELECT id FROM identities WHERE number = '{asker}'),
             b AS (SELECT id FROM identities WHERE number = '{agent}'),
             m AS (
                 INSERT INTO messages (id, room_id, seq, sender_id, text, ask, reply_to)
                 SELECT md5('{room}' || g)::uuid, '{room}', r.last_seq + g,
                        CASE WHEN g % 2 = 1 THEN a.id ELSE b.id END,
                        CASE WHEN g % 2 = 1 THEN 'earlier question ' || g
                             ELSE 'EARLIER QUESTION ' || (g - 1) END,
                        g % 2 = 1,
                        CASE WHEN g % 2 = 0 THEN md5('{room}' || (g - 1))::uuid END
                 FROM r, a, b, generate_series(1, {count}) g
                 RETURNING seq
             )
             UPDATE rooms SET last_seq = COALESCE((SELECT max(seq) FROM m), last_seq)
             WHERE id = '{room}'",
            asker = asker.number,
            agent = agent.number,
        ))
        .context("seed the history")?;
    b.cluster.sql("ANALYZE messages")?;
    Ok(())
}
