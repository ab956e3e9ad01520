//! The operator's side: the admin API on its own listener ([`api`]), its dashboard
//! ([`dashboard`]) and the CLI's client of it ([`client`]).

pub mod api;
mod changes;
pub mod client;
pub mod dashboard;
pub mod events;
mod serve;
mod view;

pub use api::AdminApp;
pub use serve::{
    MAX_OPEN as MAX_ADMIN_CONNECTIONS, MAX_PER_PEER as MAX_ADMIN_CONNECTIONS_PER_CLIENT,
};
