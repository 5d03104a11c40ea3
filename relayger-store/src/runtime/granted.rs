//! The room and message of each job this server instance granted, so that
//! its finish can be one statement ([`super::finish`]): the fence checks
//! them in SQL, and the attempt's end, the log record and the reply are
//! written from the fence's `RETURNING` in the same statement.
//!
//! A job's room and message never change, so an entry is never stale; it is
//! a hint all the same. A finish whose job is not here (granted by another
//! instance or before a restart, or dropped for room) takes the long way,
//! which reads them. Entries go when their finish commits; the map is
//! emptied whenever it reaches [`CAPACITY`] (leases that were never
//! finished here leave entries behind).

use std::collections::HashMap;
use std::sync::Mutex;

use uuid::Uuid;

/// The most jobs remembered at once (about 10 MiB at most).
const CAPACITY: usize = 65_536;

/// A granted job's room and message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct JobPlace {
    pub(crate) room_id: Uuid,
    pub(crate) message_id: Uuid,
}

/// Job id → its [`JobPlace`], for jobs this instance granted.
#[derive(Debug, Default)]
pub(crate) struct GrantedJobs(Mutex<HashMap<Uuid, JobPlace>>);

impl GrantedJobs {
    /// Remembers the jobs a committed claim granted.
    pub(crate) fn remember(&self, granted: impl IntoIterator<Item = (Uuid, JobPlace)>) {
        let mut map = self.lock();
        for (job_id, place) in granted {
            if map.len() >= CAPACITY {
                map.clear();
            }
            map.insert(job_id, place);
        }
    }

    /// Where each job is, or `None` when any of them is unknown here.
    pub(crate) fn places(&self, job_ids: impl IntoIterator<Item = Uuid>) -> Option<Vec<JobPlace>> {
        let map = self.lock();
        job_ids
            .into_iter()
            .map(|job_id| map.get(&job_id).copied())
            .collect()
    }

    /// Forgets jobs whose finish committed.
    pub(crate) fn forget(&self, job_ids: impl IntoIterator<Item = Uuid>) {
        let mut map = self.lock();
        for job_id in job_ids {
            map.remove(&job_id);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, JobPlace>> {
        // The map holds only hints: one left half-updated by a panic is
        // still correct to read.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(n: u128) -> JobPlace {
        JobPlace {
            room_id: Uuid::from_u128(n),
            message_id: Uuid::from_u128(n + 1),
        }
    }

    #[test]
    fn places_answers_only_when_every_job_is_known() {
        let jobs = GrantedJobs::default();
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        jobs.remember([(a, place(10)), (b, place(20))]);
        assert_eq!(jobs.places([b, a]), Some(vec![place(20), place(10)]));
        assert_eq!(jobs.places([a, Uuid::from_u128(3)]), None);
        jobs.forget([a]);
        assert_eq!(jobs.places([a]), None);
        assert_eq!(jobs.places([b]), Some(vec![place(20)]));
    }

    #[test]
    fn a_full_map_is_emptied_before_the_next_job() {
        let jobs = GrantedJobs::default();
        jobs.remember((0..CAPACITY as u128).map(|n| (Uuid::from_u128(n), place(n))));
        assert_eq!(jobs.lock().len(), CAPACITY);
        let last = Uuid::from_u128(u128::MAX);
        jobs.remember([(last, place(7))]);
        assert_eq!(jobs.lock().len(), 1);
        assert_eq!(jobs.places([last]), Some(vec![place(7)]));
    }
}
