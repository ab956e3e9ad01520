//! anteroom: a virtual waiting room that runs as a reverse proxy in front of a web shop.
//!
//! A visitor without a valid admission cookie gets a waiting page with their place and an ETA;
//! an admission loop lets visitors in first-come-first-served at a controlled rate and up to a
//! cap of active sessions; an admitted visitor carries an HMAC-signed cookie, checked locally,
//! and is proxied to the untouched origin.

// The modules' docs link to the private parts they are built from: read them with
// `cargo doc --document-private-items`.
#![allow(rustdoc::private_intra_doc_links)]

pub mod admin;
pub mod admission;
pub mod app;
pub mod breaker;
pub mod client;
pub mod clock;
pub mod commands;
pub mod config;
pub mod cookie;
pub mod demo;
pub mod edge;
pub mod event;
pub mod files;
pub mod fuzzing;
pub mod line;
pub mod logwriter;
pub mod metrics;
pub mod origins;
pub mod page;
pub mod probe;
pub mod proxy;
pub mod reload;
pub mod room;
pub mod route;
pub mod server;
pub mod store;
pub mod texts;
