// One peer job queue, measured for the bench (tests/src/bench/peers.rs):
//   node run.mjs PEER MODE SAMPLES JOBS WORKERS    (DATABASE_URL in the environment)
// PEER is graphile-worker or pg-boss; MODE one of the peer's `modes`.
//
// Latency (like P1): one worker process; SAMPLES no-op jobs added one at a
// time, each timed from the add call until the worker's completion commit
// reaches this process (worker.mjs), after a warm-up of 50.
// Throughput (like P2): WORKERS worker processes started and listening, then
// JOBS no-op jobs added in one call and one transaction; timed from its
// commit to the last completion commit.
//
// Prints one JSON line a step on stdout: {"event":"draining","pids":[…]}
// once the jobs are added, {"event":"drained"} once all are completed (then
// it waits for stdin to close, so the bench can read the CPU counters of the
// stretch before the workers stop), and last the result: {peer, version,
// mode, latencyMs, addMs (the add call alone), jobs, workers, seconds,
// walBytes}.
import { fork } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import pg from "pg";

const PEERS = ["graphile-worker", "pg-boss"];
const STALL_MS = 60_000;

const [name, mode, samples, jobs, workers] = process.argv.slice(2);
if (!PEERS.includes(name)) throw new Error(`unknown peer ${name}`);
const peer = await import(`./${name}.mjs`);
if (!peer.modes.includes(mode)) throw new Error(`unknown mode ${mode}`);
const url = process.env.DATABASE_URL;
const { version } = JSON.parse(
  readFileSync(new URL(`./node_modules/${name}/package.json`, import.meta.url)),
);
const say = (line) => console.log(JSON.stringify(line));
const now = () => performance.timeOrigin + performance.now();

/** A forked worker.mjs and the completions it has reported. */
function startWorker(flushMs) {
  const child = fork(new URL("./worker.mjs", import.meta.url), [name, mode, String(flushMs)], {
    env: { ...process.env, NO_LOG_SUCCESS: "1" },
    stdio: ["ignore", 2, 2, "ipc"],
  });
  const worker = { child, completed: 0, at: 0 };
  worker.ready = new Promise((resolve, reject) => {
    child.on("message", (message) => {
      if (message.ready) return resolve();
      Object.assign(worker, message);
      progressed();
    });
    child.on("exit", (code) => {
      const error = new Error(`a ${name} worker exited with ${code}`);
      reject(error);
      if (!worker.stopping) waiting?.reject(error);
    });
  });
  return worker;
}

/** Who waits for how many completions from which workers. */
let waiting = null;
function progressed() {
  if (!waiting) return;
  if (waiting.workers.reduce((sum, w) => sum + w.completed, 0) >= waiting.n) {
    clearTimeout(waiting.stall);
    waiting.resolve();
    waiting = null;
  } else {
    waiting.stall.refresh();
  }
}
function completions(workers, n) {
  return new Promise((resolve, reject) => {
    const stall = setTimeout(() => reject(new Error(`no completion for ${STALL_MS} ms`)), STALL_MS);
    waiting = { workers, n, resolve, reject, stall };
    progressed();
  });
}

async function stopAll(running) {
  await Promise.all(
    running.map((w) => {
      w.stopping = true;
      const exited = new Promise((resolve) => w.child.once("exit", resolve));
      w.child.send("stop");
      return exited;
    }),
  );
}

await peer.install(url);
const producer = await peer.producer(url);
// The producer's own connection: the many jobs' transaction, and the WAL
// written while they drain (the whole cluster's, as P2 counts it).
const client = new pg.Client({ connectionString: url });
await client.connect();
const walLsn = async () => (await client.query("SELECT pg_current_wal_insert_lsn() AS l")).rows[0].l;

const latencyMs = [];
const addMs = [];
{
  const worker = startWorker(0);
  await worker.ready;
  const warmUp = Math.min(Number(samples), 50);
  for (let i = 0; i < warmUp + Number(samples); i++) {
    const before = worker.completed;
    const started = performance.now();
    await producer.add(i);
    const added = performance.now();
    await completions([worker], before + 1);
    if (i >= warmUp) {
      latencyMs.push(performance.now() - started);
      addMs.push(added - started);
    }
  }
  await stopAll([worker]);
}

const running = Array.from({ length: Number(workers) }, () => startWorker(20));
await Promise.all(running.map((w) => w.ready));
// P2 analyzes the database once its backlog is in, before the workers start;
// here the workers already run, so the statistics are made in the jobs'
// transaction and their commit re-plans the workers' cached statements for
// a table of JOBS rows (a plan made while the table was empty can make each
// fetch scan all of it).
await client.query("BEGIN");
await producer.addMany(Number(jobs), client);
await client.query("ANALYZE");
await client.query("COMMIT");
const added = now();
const fromLsn = await walLsn();
say({ event: "draining", pids: running.map((w) => w.child.pid) });
await completions(running, Number(jobs));
const seconds = (Math.max(...running.map((w) => w.at)) - added) / 1e3;
const toLsn = await walLsn();
say({ event: "drained" });
process.stdin.resume();
await once(process.stdin, "end");
await stopAll(running);
const wal = await client.query("SELECT pg_wal_lsn_diff($1, $2)::bigint AS b", [toLsn, fromLsn]);
await client.end();
await producer.close();

say({
  peer: name,
  version,
  mode,
  latencyMs,
  addMs,
  jobs: Number(jobs),
  workers: Number(workers),
  seconds,
  walBytes: Number(wal.rows[0].b),
});
