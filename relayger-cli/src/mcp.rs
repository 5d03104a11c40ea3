//! `relayger mcp`: the profile's identity served to an assistant over the
//! Model Context Protocol, on stdio or (with `--http`) Streamable HTTP on
//! loopback.
//!
//! Every tool runs the same code as the matching CLI command
//! ([`commands::run`](crate::commands::run)), so the checks, the
//! permissions of the profile's token, the server's budgets and the local
//! sealing and opening are the CLI's. Resources (the inbox, each room, the
//! contact requests) can be subscribed to; the identity socket's
//! `inbox_changed` signal wakes the subscription.

mod ask;
mod params;
mod server;
mod tools;
mod wake;

use std::net::SocketAddr;
use std::sync::Arc;

use relayger_core::ErrorCode;
use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use crate::cli::McpArgs;
use crate::commands::Context;
use crate::error::CliError;
use crate::output::{Mode, Outcome};

use self::server::McpServer;

/// Where the Streamable HTTP endpoint is served.
const HTTP_PATH: &str = "/mcp";

pub(crate) async fn run(context: &Context, args: McpArgs) -> Result<Outcome, CliError> {
    // A missing or unreadable profile fails here, before any client connects.
    let client = context.client().await?;
    let context = Arc::new(Context {
        dir: context.dir.clone(),
        profile: context.profile.clone(),
        env: context.env.clone(),
        allow_insecure_http: context.allow_insecure_http,
        mode: Mode::Json,
    });
    match args.http {
        None => {
            let service = McpServer::new(context, client)
                .serve(rmcp::transport::stdio())
                .await
                .map_err(|err| internal(format!("cannot start the MCP session: {err}")))?;
            service
                .waiting()
                .await
                .map_err(|err| internal(format!("the MCP session failed: {err}")))?;
        }
        Some(addr) => serve_http(context, client, &addr).await?,
    }
    Ok(Outcome::streamed())
}

/// `addr` as a loopback socket address; anything else is refused, since
/// the endpoint acts as the profile's identity without asking who calls.
fn loopback_addr(addr: &str) -> Result<SocketAddr, CliError> {
    let parsed: SocketAddr = addr.parse().map_err(|_| {
        CliError::invalid(format!(
            "--http `{addr}` is not an address like 127.0.0.1:7331 or [::1]:7331"
        ))
    })?;
    if !parsed.ip().is_loopback() {
        return Err(CliError::invalid(format!(
            "--http `{addr}` is not a loopback address: the MCP endpoint acts as this profile's identity, so it listens on 127.0.0.1 or ::1 only"
        )));
    }
    Ok(parsed)
}

async fn serve_http(
    context: Arc<Context>,
    client: relayger_worker::Client,
    addr: &str,
) -> Result<(), CliError> {
    let addr = loopback_addr(addr)?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|err| CliError::invalid(format!("cannot listen on {addr}: {err}")))?;
    let local = listener
        .local_addr()
        .map_err(|err| internal(format!("cannot read the listening address: {err}")))?;
    let stop = CancellationToken::new();
    // Loopback Host names only (the default: no DNS rebinding), and no
    // browser: a request with any Origin header is refused, so a web page
    // cannot drive the endpoint.
    let config = StreamableHttpServerConfig::default()
        .enforce_origin_validation()
        .with_cancellation_token(stop.child_token());
    let service = StreamableHttpService::new(
        move || Ok(McpServer::new(context.clone(), client.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = axum::Router::new().nest_service(HTTP_PATH, service);
    // The line tests and scripts wait for (stdout stays free of anything else).
    println!("relayger mcp listening on http://{local}{HTTP_PATH}");
    let shutdown = async move {
        let _ = tokio::signal::ctrl_c().await;
        stop.cancel();
    };
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|err| internal(format!("the MCP endpoint failed: {err}")))
}

fn internal(message: String) -> CliError {
    CliError::new(ErrorCode::Internal, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_addresses_are_served() {
        let table = [
            ("127.0.0.1:0", true),
            ("127.0.0.1:7331", true),
            ("[::1]:7331", true),
            ("0.0.0.0:7331", false),
            ("[::]:7331", false),
            ("192.168.1.20:7331", false),
            ("localhost:7331", false),
            ("127.0.0.1", false),
        ];
        for (addr, served) in table {
            assert_eq!(loopback_addr(addr).is_ok(), served, "{addr}");
        }
        let refused = loopback_addr("0.0.0.0:7331").expect_err("refused");
        assert_eq!(refused.code(), "invalid_argument");
    }
}
