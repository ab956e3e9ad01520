//! anteroom as the edge: HTTPS termination ([`tls`]), the answer to plain HTTP when only
//! HTTPS is served ([`redirect`]), and the proof of work asked of new visitors ([`challenge`]).

pub mod challenge;
pub mod redirect;
pub mod tls;
