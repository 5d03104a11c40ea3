//! The filters of `GET /v1/runtimes/{id}/jobs`: which of a runtime's jobs a
//! search keeps, checked before any query runs.

use uuid::Uuid;

use crate::ids::IdentityNumber;
use crate::job::JobState;
use crate::wire::Timestamp;

/// What a job search keeps: every given filter must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobFilter {
    pub state: Option<JobState>,
    pub room: Option<Uuid>,
    /// The question's sender.
    pub sender: Option<IdentityNumber>,
    /// Questions sent at or after this time.
    pub since: Option<Timestamp>,
    /// Questions sent before this time.
    pub until: Option<Timestamp>,
}

/// A search's filters as a request spells them (`state`, `sender`, `since`
/// and `until` as text).
#[derive(Debug, Clone, Copy, Default)]
pub struct JobFilterText<'a> {
    pub state: Option<&'a str>,
    pub room: Option<Uuid>,
    pub sender: Option<&'a str>,
    pub since: Option<&'a str>,
    pub until: Option<&'a str>,
}

impl JobFilter {
    /// The filter a request asks for, or why it is refused.
    pub fn parse(text: JobFilterText<'_>) -> Result<JobFilter, String> {
        let state = text
            .state
            .map(|state| {
                JobState::parse(state).ok_or_else(|| {
                    let states: Vec<&str> = JobState::ALL.iter().map(|s| s.as_str()).collect();
                    format!("state must be one of {}, got `{state}`", states.join(", "))
                })
            })
            .transpose()?;
        let sender = text
            .sender
            .map(|number| {
                IdentityNumber::parse(number)
                    .map_err(|e| format!("sender must be an identity number: {e}"))
            })
            .transpose()?;
        let time = |name: &str, value: Option<&str>| {
            value
                .map(|value| Timestamp::parse(value).map_err(|e| format!("{name}: {e}")))
                .transpose()
        };
        let since = time("since", text.since)?;
        let until = time("until", text.until)?;
        if let (Some(since), Some(until)) = (since, until)
            && since.0 >= until.0
        {
            return Err("since must be before until: the questions lie between them".to_owned());
        }
        Ok(JobFilter {
            state,
            room: text.room,
            sender,
            since,
            until,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_are_checked() {
        let ok = |text: JobFilterText<'_>| JobFilter::parse(text).expect("accepted");
        let refused = |text: JobFilterText<'_>, part: &str| {
            let err = JobFilter::parse(text).expect_err("refused");
            assert!(err.contains(part), "{err:?} should mention {part:?}");
        };
        assert_eq!(ok(JobFilterText::default()), JobFilter::default());
        let all = ok(JobFilterText {
            state: Some("dead"),
            room: Some(Uuid::nil()),
            sender: Some("100000001"),
            since: Some("2026-12-07T10:00:00Z"),
            until: Some("2026-12-07T11:00:00Z"),
        });
        assert_eq!(all.state, Some(JobState::Dead));
        assert_eq!(all.sender.as_ref().map(|n| n.as_str()), Some("100000001"));
        let table: [(JobFilterText<'_>, &str); 6] = [
            (
                JobFilterText {
                    state: Some("lost"),
                    ..Default::default()
                },
                "state must be one of pending",
            ),
            (
                JobFilterText {
                    sender: Some("abc"),
                    ..Default::default()
                },
                "sender must be an identity number",
            ),
            (
                JobFilterText {
                    sender: Some("12"),
                    ..Default::default()
                },
                "sender",
            ),
            (
                JobFilterText {
                    since: Some("yesterday"),
                    ..Default::default()
                },
                "since:",
            ),
            (
                JobFilterText {
                    until: Some("2026-12-07 11:00:00Z"),
                    ..Default::default()
                },
                "until:",
            ),
            (
                JobFilterText {
                    since: Some("2026-12-07T11:00:00Z"),
                    until: Some("2026-12-07T11:00:00Z"),
                    ..Default::default()
                },
                "since must be before until",
            ),
        ];
        for (text, part) in table {
            refused(text, part);
        }
    }
}
