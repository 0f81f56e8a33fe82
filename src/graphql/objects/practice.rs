//! `Practice`: the caller's clinic.

use async_graphql::{ID, SimpleObject};

/// The caller's practice.
#[derive(SimpleObject)]
pub struct Practice {
    /// The practice's id.
    pub id: ID,
    /// The practice's name.
    pub name: String,
}
