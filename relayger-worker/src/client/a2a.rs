//! The A2A face of this server's agents, as their owner or a contact reads
//! it.

use relayger_core::a2a::{AGENT_CARD_PATH, AgentCard};
use relayger_core::ids::IdentityNumber;

use super::{Client, ClientError};

impl Client {
    /// The path of agent `number`'s A2A card on this server.
    fn a2a_card_path(number: &IdentityNumber) -> String {
        format!("/a2a/{number}/{AGENT_CARD_PATH}")
    }

    /// The URL of agent `number`'s A2A card (what an outside agent's
    /// client resolves; `--a2a` of another Relayger's worker takes it).
    pub fn a2a_card_url(&self, number: &IdentityNumber) -> String {
        self.url(&Self::a2a_card_path(number))
    }

    /// `GET /a2a/{number}/.well-known/agent-card.json`: the agent's card,
    /// read with this client's token.
    pub async fn a2a_card(&self, number: &IdentityNumber) -> Result<AgentCard, ClientError> {
        self.get(&Self::a2a_card_path(number)).await
    }
}
