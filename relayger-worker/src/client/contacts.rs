//! Contacts, contact requests and blocks.

use relayger_core::ids::IdentityNumber;
use relayger_core::wire::{
    AnswerRequest, Contact, ContactList, ContactNumber, ContactRequestView, ContactRequests, Done,
};
use reqwest::Method;
use uuid::Uuid;

use super::pages::all_pages;
use super::{Client, ClientError};

impl Client {
    /// `GET /v1/contacts`: all accepted contacts and their direct rooms
    /// (every page, following `next`).
    pub async fn contacts(&self) -> Result<ContactList, ClientError> {
        all_pages(async |after| self.contacts_page(after, None).await).await
    }

    /// One page of `GET /v1/contacts`: contacts after `after` (a previous
    /// page's `next`), at most `limit` (default 100, at most 500).
    pub async fn contacts_page(
        &self,
        after: Option<Uuid>,
        limit: Option<u32>,
    ) -> Result<ContactList, ClientError> {
        self.get_page("/v1/contacts", &[], after, limit).await
    }

    /// `GET /v1/contacts/requests`: all pending requests both ways (every
    /// page, following `next`), for the caller or (`as_agent`) for an agent
    /// the caller owns.
    pub async fn contact_requests(
        &self,
        as_agent: Option<&IdentityNumber>,
    ) -> Result<ContactRequests, ClientError> {
        all_pages(async |after| self.contact_requests_page(as_agent, after, None).await).await
    }

    /// One page of `GET /v1/contacts/requests`: requests after `after` (a
    /// previous page's `next`), at most `limit` of both directions
    /// together (default 100, at most 500).
    pub async fn contact_requests_page(
        &self,
        as_agent: Option<&IdentityNumber>,
        after: Option<Uuid>,
        limit: Option<u32>,
    ) -> Result<ContactRequests, ClientError> {
        let params: Vec<(&str, String)> = as_agent
            .map(|agent| ("as", agent.as_str().to_owned()))
            .into_iter()
            .collect();
        self.get_page("/v1/contacts/requests", &params, after, limit)
            .await
    }

    /// `POST /v1/contacts/requests`: asks `number` to become a contact.
    pub async fn request_contact(
        &self,
        number: &IdentityNumber,
    ) -> Result<ContactRequestView, ClientError> {
        let body = ContactNumber {
            number: number.clone(),
        };
        self.post("/v1/contacts/requests", &body).await
    }

    /// `POST /v1/contacts/requests/{number}/accept`: accepts `number`'s
    /// request, for the caller or for an agent it owns; opens the direct room.
    pub async fn accept_contact(
        &self,
        number: &IdentityNumber,
        as_agent: Option<&IdentityNumber>,
    ) -> Result<Contact, ClientError> {
        let body = AnswerRequest {
            as_agent: as_agent.cloned(),
        };
        self.post(&format!("/v1/contacts/requests/{number}/accept"), &body)
            .await
    }

    /// `POST /v1/contacts/requests/{number}/decline`.
    pub async fn decline_contact(
        &self,
        number: &IdentityNumber,
        as_agent: Option<&IdentityNumber>,
    ) -> Result<ContactRequestView, ClientError> {
        let body = AnswerRequest {
            as_agent: as_agent.cloned(),
        };
        self.post(&format!("/v1/contacts/requests/{number}/decline"), &body)
            .await
    }

    /// `DELETE /v1/contacts/requests/{number}`: withdraws the caller's own
    /// pending request to `number`.
    pub async fn withdraw_contact_request(
        &self,
        number: &IdentityNumber,
    ) -> Result<ContactRequestView, ClientError> {
        self.send_json(
            Method::DELETE,
            &format!("/v1/contacts/requests/{number}"),
            None::<&()>,
        )
        .await
    }

    /// `POST /v1/contacts/{number}/block`.
    pub async fn block(&self, number: &IdentityNumber) -> Result<Done, ClientError> {
        self.send_json(
            Method::POST,
            &format!("/v1/contacts/{number}/block"),
            None::<&()>,
        )
        .await
    }

    /// `DELETE /v1/contacts/{number}/block`.
    pub async fn unblock(&self, number: &IdentityNumber) -> Result<Done, ClientError> {
        self.send_json(
            Method::DELETE,
            &format!("/v1/contacts/{number}/block"),
            None::<&()>,
        )
        .await
    }

    /// `DELETE /v1/contacts/{number}`: ends the contact and both sides'
    /// access to the direct room.
    pub async fn remove_contact(&self, number: &IdentityNumber) -> Result<Done, ClientError> {
        self.send_json(
            Method::DELETE,
            &format!("/v1/contacts/{number}"),
            None::<&()>,
        )
        .await
    }
}
