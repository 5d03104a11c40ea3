//! `bench`: the performance figures of BENCHMARKS.md, measured against
//! pgbench on the same self-started PostgreSQL.
//!
//! ```text
//! cargo run --release -p relayger-tests --bin bench -- all
//! cargo run -p relayger-tests --bin bench -- all --quick   # a fast smoke run
//! ```

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    relayger_tests::bench::main(std::env::args().skip(1).collect()).await
}
