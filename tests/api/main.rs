//! Black-box tests over real HTTP: each starts the server on port 0 over a fresh database.

mod helpers;

mod audit;
mod auth;
mod bookings;
mod catalogue;
mod cli;
mod faults;
mod hardening;
mod http;
mod idempotency;
mod instances;
mod migrations;
mod operations;
mod patients;
mod practices;
mod realtime;
mod record;
mod spec_examples;
mod staff;
mod webhooks;
