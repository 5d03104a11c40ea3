//! `relayger-server`: argument parsing and wiring. The work happens in
//! relayger-store (database, self-managed PostgreSQL) and relayger-api (HTTP).

mod config;

use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use relayger_api::{ApiConfig, AppState, RateLimit, Registration, TlsConfig};
use relayger_store::embedded::{ClusterMode, EmbeddedPostgres, PERSISTENT_DATABASE};
use relayger_store::{PoolOptions, Store, create_database_if_missing, run_migrations};
use tracing_subscriber::EnvFilter;

use crate::config::{Cli, Command, DatabaseArgs, InvitesCommand, LogFormat, RegistrationArg};

/// mimalloc: requests allocate and free many small buffers across worker
/// threads, where the system allocator's cost showed in profiles.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut cli = Cli::parse();
    let filter = EnvFilter::try_from_env("RELAYGER_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match cli.log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().flatten_event(true).init(),
    }

    match cli.command.take().unwrap_or(Command::Serve) {
        Command::Serve => serve(&cli).await,
        Command::Invites(InvitesCommand::Create) => {
            let database = Database::open(&cli.database).await?;
            let result = async {
                run_migrations(database.session_url())
                    .await
                    .context("migrate the database")?;
                let store = Store::connect(&database.url, PoolOptions::default()).await?;
                let code = store.create_invite().await?;
                #[allow(clippy::print_stdout)]
                {
                    println!("{code}");
                }
                anyhow::Ok(())
            }
            .await;
            result.and(database.close().await)
        }
        Command::Migrate => {
            let database = Database::open(&cli.database).await?;
            let applied = run_migrations(database.session_url()).await?;
            tracing::info!(applied = applied.len(), "migrations applied");
            database.close().await
        }
    }
}

async fn serve(cli: &Cli) -> anyhow::Result<()> {
    let lease_ms = relayger_core::lease::validate_lease_ms(cli.lease_ms)
        .map_err(|e| anyhow::anyhow!("--lease-ms: {e}"))?;
    let listen = cli.listen.as_str();
    let tls = match (&cli.edge.tls_cert, &cli.edge.tls_key) {
        (Some(cert), Some(key)) => Some(
            TlsConfig::from_pem_files(cert, key).map_err(|e| anyhow::anyhow!("--tls-cert: {e}"))?,
        ),
        _ => None,
    };
    let database = Database::open(&cli.database).await?;
    let result = async {
        let applied = run_migrations(database.session_url())
            .await
            .context("migrate the database")?;
        if !applied.is_empty() {
            tracing::info!(applied = applied.len(), "migrations applied");
        }
        let pool = PoolOptions {
            max_connections: usize::from(cli.pool_size),
            ..PoolOptions::default()
        };
        let store = Store::connect(&database.url, pool)
            .await
            .context("connect to the database")?
            .with_listen_url(database.listen_url.clone());
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("listen on {listen}"))?;
        let address = listener.local_addr()?;
        let metrics_listener = match &cli.metrics_listen {
            Some(given) => {
                let at = relayger_api::metrics::metrics_listen_address(given);
                let listener = tokio::net::TcpListener::bind(&at)
                    .await
                    .with_context(|| format!("--metrics-listen on {at}"))?;
                let exporter = relayger_api::metrics::MetricsExporter::install()
                    .context("install the metrics recorder")?;
                // Printed before the address line below, which tests wait for.
                #[allow(clippy::print_stdout)]
                {
                    println!(
                        "relayger-server metrics on http://{}/metrics",
                        listener.local_addr()?
                    );
                }
                Some((listener, exporter))
            }
            None => None,
        };
        let registration = match cli.registration {
            Some(RegistrationArg::Open) => Registration::Open,
            Some(RegistrationArg::Closed) => Registration::Closed,
            None if address.ip().is_loopback() => Registration::Open,
            None => Registration::Closed,
        };
        tracing::info!(?registration, "registration");
        // Operators and tests read this line to learn the bound address.
        #[allow(clippy::print_stdout)]
        {
            let scheme = if tls.is_some() { "https" } else { "http" };
            println!("relayger-server listening on {scheme}://{address}");
        }
        let state = AppState::new(
            store,
            ApiConfig {
                lease_ms,
                registration,
                max_in_flight: cli.max_in_flight,
                max_connections: cli.edge.max_connections,
                max_connections_per_address: cli.edge.max_connections_per_address,
                header_read_timeout: Duration::from_millis(cli.edge.header_timeout_ms),
                body_read_timeout: Duration::from_millis(cli.edge.body_timeout_ms),
                token_rate: Some(RateLimit {
                    per_second: cli.edge.token_rate,
                    burst: cli.edge.token_burst,
                }),
                address_rate: Some(RateLimit {
                    per_second: cli.edge.address_rate,
                    burst: cli.edge.address_burst,
                }),
                lookup_rate: Some(RateLimit {
                    per_second: cli.edge.lookup_rate,
                    burst: cli.edge.lookup_burst,
                }),
                max_sockets_per_token: cli.edge.max_sockets_per_token,
                max_agents_per_person: cli.edge.max_agents_per_person,
                tls,
                public_url: cli.public_url.clone(),
                ..ApiConfig::default()
            },
        );
        let stop_metrics = tokio_util::sync::CancellationToken::new();
        if let Some((metrics_listener, exporter)) = metrics_listener {
            let stop = stop_metrics.clone();
            let state = state.clone();
            tokio::spawn(async move {
                let stopped = stop.cancelled_owned();
                if let Err(err) =
                    relayger_api::metrics::serve_metrics(metrics_listener, state, exporter, stopped)
                        .await
                {
                    tracing::error!(%err, "the metrics listener failed");
                }
            });
        }
        let served = relayger_api::serve(listener, state, shutdown_signal()).await;
        stop_metrics.cancel();
        served?;
        tracing::info!("stopped serving");
        anyhow::Ok(())
    }
    .await;
    let closed = database.close().await;
    result.and(closed)
}

/// Where the database lives: an operator's server, or our own cluster.
struct Database {
    url: String,
    /// `--listen-database-url`: a direct session connection (LISTEN and
    /// migrations) beside a transaction-pooling `url`.
    listen_url: Option<String>,
    embedded: Option<EmbeddedPostgres>,
}

impl Database {
    async fn open(args: &DatabaseArgs) -> anyhow::Result<Database> {
        if let Some(url) = &args.database_url {
            return Ok(Database {
                url: url.clone(),
                listen_url: args.listen_database_url.clone(),
                embedded: None,
            });
        }
        let data_dir = args.data_dir.clone();
        let user = args.postgres_user.clone();
        tracing::info!(data_dir = %data_dir.display(), "starting the self-managed PostgreSQL");
        let embedded = tokio::task::spawn_blocking(move || {
            EmbeddedPostgres::start_as(&data_dir, ClusterMode::Persistent, user.as_deref())
        })
        .await?
        .context("start the self-managed PostgreSQL")?;
        create_database_if_missing(&embedded.maintenance_url(), PERSISTENT_DATABASE)
            .await
            .context("create the relayger database")?;
        Ok(Database {
            url: embedded.database_url().to_owned(),
            listen_url: None,
            embedded: Some(embedded),
        })
    }

    /// Where session-bound work runs: LISTEN's URL when given, which
    /// migrations need too (they are not safe through transaction pooling).
    fn session_url(&self) -> &str {
        self.listen_url.as_deref().unwrap_or(&self.url)
    }

    async fn close(self) -> anyhow::Result<()> {
        if let Some(embedded) = self.embedded {
            tracing::info!("stopping the self-managed PostgreSQL");
            tokio::task::spawn_blocking(move || embedded.stop())
                .await?
                .context("stop the self-managed PostgreSQL")?;
        }
        Ok(())
    }
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    let mut terminate =
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(err) => {
                tracing::warn!(%err, "cannot listen for SIGTERM");
                let _ = interrupt.await;
                return;
            }
        };
    tokio::select! {
        _ = interrupt => tracing::info!("SIGINT received, shutting down"),
        _ = terminate.recv() => tracing::info!("SIGTERM received, shutting down"),
    }
}
