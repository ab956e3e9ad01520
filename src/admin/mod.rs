//! The operator's side: the admin API on its own listener ([`api`]) and the CLI's client of it
//! ([`client`]).

pub mod api;
pub mod client;

pub use api::AdminApp;
