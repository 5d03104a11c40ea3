//! What a person types where an id is expected: a runtime by its name, its
//! id or the start of its id; a dead letter by its job id, its message id or
//! its jobKey. The rules are here so the CLI, the Rust SDK and the server
//! read them the same way.

use uuid::Uuid;

use crate::runtime_name::{RUNTIME_NAME_RULE, is_valid_runtime_name};

/// The shortest id prefix accepted for a runtime (shorter ones match too
/// much to be meant).
pub const MIN_ID_PREFIX: usize = 4;

/// One runtime a typed reference may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate<'a> {
    pub id: Uuid,
    pub name: &'a str,
}

/// Why a typed runtime reference names no single runtime.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// Nothing matched; `known` lists what exists (`name (id)`).
    #[error("no runtime named or with id `{input}`{}", known_suffix(.known))]
    NotFound { input: String, known: Vec<String> },
    /// Several runtimes matched (an id prefix); each as `name (id)`.
    #[error("`{input}` matches {} runtimes: {}; give the name or more of the id", .candidates.len(), .candidates.join(", "))]
    Ambiguous {
        input: String,
        candidates: Vec<String>,
    },
}

fn known_suffix(known: &[String]) -> String {
    if known.is_empty() {
        "; this agent has no runtimes".to_owned()
    } else {
        format!("; this agent has {}", known.join(", "))
    }
}

fn describe(candidate: &Candidate<'_>) -> String {
    format!("{} ({})", candidate.name, candidate.id)
}

/// Whether `input` can name a runtime at all (an id or a valid name), so
/// that text which cannot is refused before any request.
pub fn check_runtime_ref(input: &str) -> Result<(), String> {
    let input = input.trim();
    if Uuid::parse_str(input).is_ok() || is_valid_runtime_name(input) {
        Ok(())
    } else {
        Err(format!(
            "ID `{input}` is neither a runtime id nor a runtime name ({RUNTIME_NAME_RULE})"
        ))
    }
}

/// The runtime `input` names among `candidates`: an exact id (any UUID
/// spelling) or an exact name first, then a unique prefix of at least
/// [`MIN_ID_PREFIX`] characters of the hyphenated id.
pub fn resolve_runtime(input: &str, candidates: &[Candidate<'_>]) -> Result<Uuid, LookupError> {
    let input = input.trim();
    if let Ok(id) = Uuid::parse_str(input)
        && let Some(found) = candidates.iter().find(|c| c.id == id)
    {
        return Ok(found.id);
    }
    if let Some(found) = candidates.iter().find(|c| c.name == input) {
        return Ok(found.id);
    }
    let prefix = input.to_ascii_lowercase();
    let is_prefix =
        prefix.len() >= MIN_ID_PREFIX && prefix.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    let matches: Vec<&Candidate<'_>> = if is_prefix {
        candidates
            .iter()
            .filter(|c| c.id.hyphenated().to_string().starts_with(&prefix))
            .collect()
    } else {
        Vec::new()
    };
    match matches.as_slice() {
        [one] => Ok(one.id),
        [] => Err(LookupError::NotFound {
            input: input.to_owned(),
            known: candidates.iter().map(describe).collect(),
        }),
        several => Err(LookupError::Ambiguous {
            input: input.to_owned(),
            candidates: several.iter().map(|c| describe(c)).collect(),
        }),
    }
}

/// How a dead letter is named: the `jobId` that `runtimes dead-letters`
/// lists or the id of its message (both UUIDs; one runtime has one job a
/// message), or its `jobKey`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobRef {
    /// A job id or the id of the job's message.
    Id(Uuid),
    /// The jobKey (`job_<runtime>_<room>_<message>`, hex ids).
    Key(String),
}

impl From<Uuid> for JobRef {
    fn from(id: Uuid) -> JobRef {
        JobRef::Id(id)
    }
}

/// The rule, as users read it in errors.
pub const JOB_REF_RULE: &str = "a job is named by its jobId, its message id (UUIDs) or its jobKey (job_<32 hex>_<32 hex>_<32 hex>)";

impl JobRef {
    /// `text` as a job reference, or `None` when it is none of the three.
    pub fn parse(text: &str) -> Option<JobRef> {
        let text = text.trim();
        if let Ok(id) = Uuid::parse_str(text) {
            return Some(JobRef::Id(id));
        }
        crate::job::job_key_ids(text).map(|_| JobRef::Key(text.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "0190a8c4-8a3e-7b6e-9f1c-3d2b1a0f9e8d";
    const B: &str = "0190a8c4-ffff-7b6e-9f1c-3d2b1a0f9e8d";
    const C: &str = "7a000000-0000-7000-8000-000000000001";

    fn candidates() -> Vec<Candidate<'static>> {
        vec![
            Candidate {
                id: Uuid::parse_str(A).expect("uuid"),
                name: "reply-worker",
            },
            Candidate {
                id: Uuid::parse_str(B).expect("uuid"),
                name: "open-bot",
            },
            Candidate {
                id: Uuid::parse_str(C).expect("uuid"),
                // A name that looks like the start of another's id.
                name: "0190",
            },
        ]
    }

    #[test]
    fn resolve_runtime_table() {
        let id = |text: &str| Uuid::parse_str(text).expect("uuid");
        let table: [(&str, Result<Uuid, &str>); 11] = [
            (A, Ok(id(A))),
            (&A.to_uppercase(), Ok(id(A))),
            (&A.replace('-', ""), Ok(id(A))),
            ("reply-worker", Ok(id(A))),
            (" open-bot ", Ok(id(B))),
            // An exact name wins over an id prefix.
            ("0190", Ok(id(C))),
            ("7a00", Ok(id(C))),
            ("0190a8c4-ff", Ok(id(B))),
            ("0190a8c4", Err("ambiguous")),
            ("7a0", Err("not_found")),
            ("Reply-Worker", Err("not_found")),
        ];
        for (input, expected) in table {
            let got = resolve_runtime(input, &candidates()).map_err(|err| match err {
                LookupError::NotFound { .. } => "not_found",
                LookupError::Ambiguous { .. } => "ambiguous",
            });
            assert_eq!(got, expected, "{input}");
        }
    }

    #[test]
    fn check_runtime_ref_table() {
        let table = [
            (A, true),
            ("reply-worker", true),
            ("0190a8", true),
            ("not a name!", false),
            ("-x", false),
            ("", false),
        ];
        for (input, ok) in table {
            assert_eq!(check_runtime_ref(input).is_ok(), ok, "{input}");
        }
    }

    #[test]
    fn errors_list_the_candidates() {
        let ambiguous = resolve_runtime("0190a8c4", &candidates())
            .expect_err("ambiguous")
            .to_string();
        assert!(
            ambiguous.contains(&format!("reply-worker ({A})")),
            "{ambiguous}"
        );
        assert!(
            ambiguous.contains(&format!("open-bot ({B})")),
            "{ambiguous}"
        );
        let missing = resolve_runtime("nope", &candidates())
            .expect_err("missing")
            .to_string();
        assert!(missing.contains("open-bot"), "{missing}");
        let none = resolve_runtime("nope", &[]).expect_err("none").to_string();
        assert!(none.contains("no runtimes"), "{none}");
    }

    #[test]
    fn job_ref_table() {
        let hex = "0123456789abcdef0123456789abcdef";
        let key = format!("job_{hex}_{hex}_{hex}");
        let table: [(String, Option<JobRef>); 8] = [
            (
                A.to_owned(),
                Some(JobRef::Id(Uuid::parse_str(A).expect("uuid"))),
            ),
            (key.clone(), Some(JobRef::Key(key.clone()))),
            (format!(" {key} "), Some(JobRef::Key(key.clone()))),
            (key.to_uppercase(), None),
            (format!("job_{hex}_{hex}"), None),
            (format!("job_{hex}_{hex}_{hex}_{hex}"), None),
            ("reply-worker".to_owned(), None),
            (String::new(), None),
        ];
        for (input, expected) in table {
            assert_eq!(JobRef::parse(&input), expected, "{input}");
        }
    }
}
