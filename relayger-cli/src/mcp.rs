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
use std::time::Duration;

use axum::response::IntoResponse;
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
        Some(addr) => {
            let sessions = SessionLimits {
                max: args.max_sessions,
                idle: Duration::from_secs(args.session_idle_secs),
            };
            serve_http(context, client, &addr, sessions).await?
        }
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

/// `--max-sessions` and `--session-idle-secs`: each session holds a server
/// task and its state, so a local program opening sessions in a loop must
/// not grow the process without bound.
#[derive(Debug, Clone, Copy)]
struct SessionLimits {
    max: usize,
    idle: Duration,
}

/// The session manager and the lock that makes "count, then create" one
/// step, so concurrent `initialize` calls cannot pass the cap together.
#[derive(Clone)]
struct SessionCap {
    sessions: Arc<LocalSessionManager>,
    creating: Arc<tokio::sync::Mutex<()>>,
    max: usize,
}

/// Answers an `initialize` (a POST without `Mcp-Session-Id`) 503 while
/// `max` sessions are open; lets everything else through.
async fn cap_sessions(
    axum::extract::State(cap): axum::extract::State<SessionCap>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let opens_session = request.method() == axum::http::Method::POST
        && !request.headers().contains_key("mcp-session-id");
    if !opens_session {
        return next.run(request).await;
    }
    let _creating = cap.creating.lock().await;
    let open = cap.sessions.sessions.read().await.len();
    if open >= cap.max {
        let message = format!(
            "{open} MCP sessions are open, the limit (--max-sessions); close one (DELETE with its Mcp-Session-Id) or wait for an idle one to expire"
        );
        return (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            [(axum::http::header::RETRY_AFTER, "1")],
            message,
        )
            .into_response();
    }
    next.run(request).await
}

async fn serve_http(
    context: Arc<Context>,
    client: relayger_worker::Client,
    addr: &str,
    limits: SessionLimits,
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
    let mut sessions = LocalSessionManager::default();
    // A session unused this long ends, and leaves the manager with it.
    sessions.session_config.keep_alive = Some(limits.idle);
    let sessions = Arc::new(sessions);
    let service = StreamableHttpService::new(
        move || Ok(McpServer::new(context.clone(), client.clone())),
        sessions.clone(),
        config,
    );
    let cap = SessionCap {
        sessions,
        creating: Arc::default(),
        max: limits.max,
    };
    let router = axum::Router::new()
        .nest_service(HTTP_PATH, service)
        .layer(axum::middleware::from_fn_with_state(cap, cap_sessions));
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
