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
    for (name, value, credential) in table {
        assert_eq!(
            is_credential_entry(name, value),
            credential,
            "{name}={value}"
        );
    }
}
