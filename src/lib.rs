//! practice-api: a GraphQL API for clinic practice management.
//!
//! Layers, each depending only on the ones after it: `http` (axum: routes, GraphQL over HTTP)
//! → `graphql` (the schema, one module per resource) → `auth` (tokens, passwords,
//! permissions) and `store` (the only place with SQL). `admin` holds the operator's commands
//! that `main.rs` exposes on the command line.

#![forbid(unsafe_code)]

pub mod admin;
pub mod auth;
pub mod config;
pub mod graphql;
pub mod http;
pub mod store;
pub mod text;
