//! anteroom as the edge: HTTPS termination ([`tls`]) and the answer to plain HTTP when only
//! HTTPS is served ([`redirect`]).

pub mod redirect;
pub mod tls;
