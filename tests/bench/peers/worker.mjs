// One worker process of a peer, forked by run.mjs:
//   worker.mjs PEER MODE FLUSH_MS
// It tells run.mjs when the peer's completions are committed: the moment the
// peer's own pg client reads the ReadyForQuery that ends its completion
// statement (run outside a transaction, so after its COMMIT). That is the
// first moment anything can know a completion is durable; the IPC message
// to the producer costs tens of microseconds, less than any notice the peer
// could send itself.
import pg from "pg";

const [name, mode, flushMs] = process.argv.slice(2);
const peer = await import(`./${name}.mjs`);

let completed = 0;
let at = 0;
let timer = null;
const report = () => {
  timer = null;
  process.send({ completed, at });
};

const readyForQuery = pg.Query.prototype.handleReadyForQuery;
pg.Query.prototype.handleReadyForQuery = function (connection) {
  const result = this._results;
  const n =
    this._canceledDueToError || Array.isArray(result) ? 0 : peer.completed(this.text ?? "", result);
  if (n > 0) {
    completed += n;
    at = performance.timeOrigin + performance.now();
    // Throughput runs report at most every FLUSH_MS (with the exact commit
    // time); latency runs at once.
    if (Number(flushMs) === 0) report();
    else timer ??= setTimeout(report, Number(flushMs));
  }
  return readyForQuery.call(this, connection);
};

const stop = await peer.work(process.env.DATABASE_URL, mode);
process.on("message", async (message) => {
  if (message === "stop") {
    await stop();
    process.exit(0);
  }
});
// run.mjs gone (killed with the bench): stop too.
process.on("disconnect", () => process.exit(1));
process.send({ ready: true });
