//! Whether a token may be sent to a server URL: over TLS (`https://`,
//! `wss://`) always, over plain `http://`/`ws://` only to this machine
//! (`localhost`, `127.0.0.0/8`, `::1`). Anything else needs the operator to
//! say so (`--allow-insecure-http`, `RELAYGER_ALLOW_INSECURE_HTTP=1`).

use std::net::IpAddr;

/// The environment variable that allows plain HTTP to other machines.
pub const ALLOW_INSECURE_HTTP_ENV: &str = "RELAYGER_ALLOW_INSECURE_HTTP";

/// Why a token must not travel to `url`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InsecureTransport {
    pub url: String,
}

impl std::fmt::Display for InsecureTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "refusing to send a token over plain HTTP to {}, which is not this machine: \
             use https://, or pass --allow-insecure-http (or set {ALLOW_INSECURE_HTTP_ENV}=1)",
            self.url
        )
    }
}

impl std::error::Error for InsecureTransport {}

/// Whether an environment value turns the allowance on (`1`, `true`, `yes`).
pub fn allowed_by_env(value: Option<&str>) -> bool {
    value.is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes"))
}

/// `Ok` when a token may be sent to `url`. An unknown scheme is refused as
/// well: only the four above are understood.
pub fn check_token_transport(url: &str) -> Result<(), InsecureTransport> {
    let refuse = || {
        Err(InsecureTransport {
            url: url.to_owned(),
        })
    };
    let lower = url.trim().to_ascii_lowercase();
    let rest = if lower.starts_with("https://") || lower.starts_with("wss://") {
        return Ok(());
    } else if let Some(rest) = lower
        .strip_prefix("http://")
        .or_else(|| lower.strip_prefix("ws://"))
    {
        rest
    } else {
        return refuse();
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    // Userinfo is not a host: `http://localhost@evil.example` is evil.example.
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let host = if let Some(bracketed) = host_port.strip_prefix('[') {
        match bracketed.split_once(']') {
            Some((host, _)) => host,
            None => return refuse(),
        }
    } else {
        host_port.split(':').next().unwrap_or_default()
    };
    let loopback = host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if loopback { Ok(()) } else { refuse() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_travel_over_tls_anywhere_and_plain_http_only_to_this_machine() {
        let table = [
            ("https://relay.example.com", true),
            ("HTTPS://relay.example.com:8443/x", true),
            ("wss://relay.example.com/v1/socket", true),
            ("http://127.0.0.1:7070", true),
            ("http://127.8.9.10", true),
            ("http://localhost:7070/", true),
            ("http://LOCALHOST", true),
            ("http://[::1]:7070", true),
            ("ws://127.0.0.1:7070/v1/socket", true),
            ("http://relay.example.com", false),
            ("http://10.0.0.5:7070", false),
            ("http://0.0.0.0:7070", false),
            ("http://[::]:7070", false),
            ("http://[2001:db8::1]:7070", false),
            ("http://localhost.example.com", false),
            ("http://localhost@relay.example.com", false),
            ("http://127.0.0.1@relay.example.com/", false),
            ("ws://relay.example.com", false),
            ("ftp://127.0.0.1", false),
            ("http://[::1", false),
            ("127.0.0.1:7070", false),
        ];
        for (url, allowed) in table {
            assert_eq!(check_token_transport(url).is_ok(), allowed, "{url}");
        }
    }

    #[test]
    fn only_clear_yes_values_allow_insecure_http() {
        for (value, allowed) in [
            (None, false),
            (Some(""), false),
            (Some("0"), false),
            (Some("no"), false),
            (Some("1"), true),
            (Some("true"), true),
            (Some(" YES "), true),
        ] {
            assert_eq!(allowed_by_env(value), allowed, "{value:?}");
        }
    }
}
