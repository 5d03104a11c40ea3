//! Lists answered in pages: every page of one, following `next`.

use relayger_core::wire::{ContactList, ContactRequests, JobList, RoomList, TokenList};
use uuid::Uuid;

use super::ClientError;

/// A list answered in pages that continue after the last page's `next`.
pub(crate) trait Paged {
    /// The cursor of the next page, taken out (none once this is the last).
    fn take_next(&mut self) -> Option<Uuid>;
    /// Adds the items of a later page, and its cursor.
    fn extend(&mut self, page: Self);
}

/// [`Paged`] for a list whose items are one field.
macro_rules! paged_by {
    ($list:ty, $items:ident) => {
        impl Paged for $list {
            fn take_next(&mut self) -> Option<Uuid> {
                self.next.take()
            }
            fn extend(&mut self, mut page: Self) {
                self.$items.append(&mut page.$items);
                self.next = page.next;
            }
        }
    };
}

paged_by!(RoomList, rooms);
paged_by!(TokenList, tokens);
paged_by!(ContactList, contacts);
paged_by!(JobList, jobs);

impl Paged for ContactRequests {
    fn take_next(&mut self) -> Option<Uuid> {
        self.next.take()
    }
    fn extend(&mut self, mut page: Self) {
        self.incoming.append(&mut page.incoming);
        self.outgoing.append(&mut page.outgoing);
        self.count = page.count;
        self.next = page.next;
    }
}

/// Every page of a list, from the first, following `next`.
pub(crate) async fn all_pages<T: Paged, F>(
    mut page: impl FnMut(Option<Uuid>) -> F,
) -> Result<T, ClientError>
where
    F: std::future::Future<Output = Result<T, ClientError>>,
{
    let mut all = page(None).await?;
    while let Some(after) = all.take_next() {
        let more = page(Some(after)).await?;
        all.extend(more);
    }
    Ok(all)
}
