//! `relayger-testdb`: the throwaway PostgreSQL cluster behind `scripts/test`.
//!
//! ```text
//! relayger-testdb start DIR   start (initdb on first use) and print TEST_DATABASE_URL
//! relayger-testdb stop DIR    stop it; a no-op when nothing runs
//! ```
//! It reuses relayger-store's self-managed PostgreSQL, so the suite and the
//! server's zero-configuration mode share one implementation.

use std::path::PathBuf;

use anyhow::{Context, bail};
use relayger_store::embedded::{ClusterMode, EmbeddedPostgres, stop_data_dir};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (command, dir) = match args.as_slice() {
        [command, dir] => (command.as_str(), PathBuf::from(dir)),
        _ => bail!("usage: relayger-testdb start|stop DIR"),
    };
    match command {
        "start" => {
            let cluster = EmbeddedPostgres::start(&dir, ClusterMode::Throwaway)
                .context("start the test PostgreSQL")?;
            let url = cluster.database_url().to_owned();
            cluster.detach();
            #[allow(clippy::print_stdout)]
            {
                println!("{url}");
            }
            Ok(())
        }
        "stop" => stop_data_dir(&dir).context("stop the test PostgreSQL"),
        other => bail!("unknown command `{other}`; usage: relayger-testdb start|stop DIR"),
    }
}
