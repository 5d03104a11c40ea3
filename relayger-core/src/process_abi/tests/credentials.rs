//! The variables and values a handler may never be given.

use super::*;

#[test]
fn credential_rule_table() {
    let credentials = [
        "RELAYGER_TOKEN",
        "RELAYGER_HOME",
        "relayger_token",
        "DATABASE_URL",
        "TEST_DATABASE_URL",
        "PGPASSWORD",
        "PGHOST",
        "AWS_ACCESS_KEY_ID",
        "AWS_SESSION_TOKEN",
        "AZURE_STORAGE_CONNECTION_STRING",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "GCS_BUCKET_KEY",
        "S3_ENDPOINT",
        "GITHUB_TOKEN",
        "OPENAI_API_KEY",
        "MY_SECRET",
        "SMTP_PASSWORD",
        "SSH_PRIVATE_KEY_PATH",
        "Api_Key",
        "POSTGRES_PASSWORD",
        "POSTGRES_HOST",
        "MYSQL_PWD",
        "MYSQL_HOST",
        "REDIS_URL",
        "MONGODB_URI",
        "SENTRY_DSN",
        "DSN",
    ];
    for name in credentials {
        assert!(is_credential_variable(name), "{name} must be refused");
    }
    let ordinary = [
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "TZ",
        "NODE_OPTIONS",
        "TMPDIR",
        "PWD",
        "OLDPWD",
    ];
    for name in ordinary {
        assert!(!is_credential_variable(name), "{name} must pass");
    }
}

#[test]
fn connection_strings_with_a_password_are_credentials() {
    let table = [
        ("CACHE_URL", "redis://:hunter2@cache:6379/0", true),
        ("APP_DB_URI", "postgres://app:hunter2@db/app", true),
        ("UPSTREAM_URL", "https://user:pw@example.com/x?y=1", true),
        ("url", "amqp://guest:guest@rabbit", true),
        ("DATABASE_URL", "postgres://db/app", true),
        ("UPSTREAM_URL", "https://example.com/path", false),
        ("UPSTREAM_URL", "https://user@example.com/", false),
        ("UPSTREAM_URL", "https://example.com/a:b@c", false),
        ("HOMEPAGE", "https://user:pw@example.com", false),
        ("PATH", "/usr/bin:/bin", false),
    ];
    assert_entries(&table);
}

#[test]
fn tokens_in_userinfo_and_credential_query_parameters_are_credentials() {
    let table = [
        // A token as the userinfo, without a password.
        (
            "GIT_REMOTE_URL",
            "https://ghp_abc123DEF456@github.com/o/r.git",
            true,
        ),
        ("UPSTREAM_URL", "https://github_pat_11ABC@github.com/", true),
        ("UPSTREAM_URL", "https://glpat-xyz@gitlab.example/", true),
        ("UPSTREAM_URL", "https://sk-live123@api.example/", true),
        ("UPSTREAM_URL", "https://a1b2c3d4e5f6g7h8i9j0k1@host/", true),
        ("UPSTREAM_URL", "https://deploy@example.com/", false),
        ("UPSTREAM_URL", "https://x-access-token@example.com/", false),
        // Credential query parameters, whatever their case.
        (
            "WEBHOOK_URL",
            "https://hooks.example/x?access_token=abc",
            true,
        ),
        ("WEBHOOK_URL", "https://hooks.example/x?a=1&token=abc", true),
        (
            "WEBHOOK_URL",
            "https://hooks.example/x?api_key=abc#top",
            true,
        ),
        ("WEBHOOK_URL", "https://hooks.example/x?apiKey=abc", true),
        ("WEBHOOK_URL", "https://hooks.example/x?key=abc", true),
        (
            "BLOB_URI",
            "https://s.example/b?X-Amz-Signature=ff&X-Amz-Credential=a",
            true,
        ),
        ("BLOB_URI", "https://s.example/b?sv=2024&sig=abc", true),
        (
            "UPSTREAM_URL",
            "https://example.com/x?client_secret=s",
            true,
        ),
        (
            "UPSTREAM_URL",
            "https://example.com/x?page=2&sort=name",
            false,
        ),
        ("UPSTREAM_URL", "https://example.com/x?token=", false),
        ("UPSTREAM_URL", "https://example.com/x?monkey=1", false),
        ("UPSTREAM_URL", "https://example.com/x#token=abc", false),
        ("UPSTREAM_URL", "https://example.com/token/abc", false),
        // Only connection-string names are judged by value.
        ("HOMEPAGE", "https://example.com/x?access_token=abc", false),
    ];
    assert_entries(&table);
}

/// Each `(name, value, credential)` row judged by [`is_credential_entry`].
fn assert_entries(table: &[(&str, &str, bool)]) {
    for &(name, value, credential) in table {
        assert_eq!(
            is_credential_entry(name, value),
            credential,
            "{name}={value}"
        );
    }
}
