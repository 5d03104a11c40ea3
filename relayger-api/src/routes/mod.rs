//! Handlers, one module per resource.

pub(crate) mod a2a;
pub(crate) mod activity;
pub(crate) mod contacts;
pub(crate) mod identity;
pub(crate) mod messages;
pub(crate) mod rooms;
pub(crate) mod runtime;
