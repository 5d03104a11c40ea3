//! How the store finishes the jobs of one finish request: the rule that
//! picks the path, kept apart from the SQL that walks it.

/// The path one job's finish takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishRoute {
    /// A finish with a note: in a transaction of its own, so a refused note
    /// (a stale version, too many notes) rolls back only this job.
    OwnTransaction,
    /// One statement for the batch: the job completes (a reply, a skip or
    /// neither, no error) and this server instance granted it, so it knows
    /// the job's room and message without reading them.
    OneStatement,
    /// The long way: the fence, then the attempt's end, then the reply — a
    /// failed attempt (its retry or dead letter is judged between them), or
    /// a job another instance granted.
    LongWay,
}

impl FinishRoute {
    /// The route of one job's finish.
    pub fn of(has_note: bool, failed: bool, place_known: bool) -> FinishRoute {
        match (has_note, failed, place_known) {
            (true, _, _) => FinishRoute::OwnTransaction,
            (false, false, true) => FinishRoute::OneStatement,
            (false, _, _) => FinishRoute::LongWay,
        }
    }

    /// The route of the jobs of a batch that share one transaction (those
    /// without a note): one statement for all of them only when every one
    /// of them can go that way, since they commit together; otherwise all go the long
    /// way. An empty batch has nothing to route: the long way, which then
    /// does nothing.
    pub fn of_batch(routes: impl IntoIterator<Item = FinishRoute>) -> FinishRoute {
        let mut any = false;
        for route in routes {
            any = true;
            if route != FinishRoute::OneStatement {
                return FinishRoute::LongWay;
            }
        }
        if any {
            FinishRoute::OneStatement
        } else {
            FinishRoute::LongWay
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FinishRoute::{self, LongWay, OneStatement, OwnTransaction};

    #[test]
    fn one_job() {
        // (note, failed, place known) → route
        let table = [
            ((true, false, true), OwnTransaction),
            ((true, true, true), OwnTransaction),
            ((true, false, false), OwnTransaction),
            ((false, false, true), OneStatement),
            ((false, true, true), LongWay),
            ((false, false, false), LongWay),
            ((false, true, false), LongWay),
        ];
        for ((note, failed, known), route) in table {
            assert_eq!(
                FinishRoute::of(note, failed, known),
                route,
                "note {note}, failed {failed}, place known {known}"
            );
        }
    }

    #[test]
    fn a_batch_goes_in_one_statement_a_job_only_when_every_job_can() {
        let table: [(&[FinishRoute], FinishRoute); 5] = [
            (&[OneStatement], OneStatement),
            (&[OneStatement, OneStatement, OneStatement], OneStatement),
            (&[OneStatement, LongWay], LongWay),
            (&[LongWay, OneStatement], LongWay),
            (&[], LongWay),
        ];
        for (routes, batch) in table {
            assert_eq!(
                FinishRoute::of_batch(routes.iter().copied()),
                batch,
                "{routes:?}"
            );
        }
    }
}
