//! practice-api: a GraphQL API for clinic practice management.
//!
//! Layers, each depending only on the ones after it: `http` (axum: routes, GraphQL over HTTP)
//! → `graphql` (the request pipeline, the schema's object graph, one module per resource) →
//! `auth` (tokens, passwords, permissions) and `events` (the live view of the event log,
//! webhook delivery, retention) → `store` (the only place with SQL) → `domain` (the refusals
//! GraphQL and the command line share). `admin` holds the operator's commands
//! that `main.rs` exposes on the command line. README.md's "Architecture" is the map.

#![forbid(unsafe_code)]

pub mod admin;
pub mod auth;
pub mod config;
pub mod domain;
pub mod events;
pub mod graphql;
pub mod http;
pub mod store;
pub mod text;
