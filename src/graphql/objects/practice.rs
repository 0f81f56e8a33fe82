//! `Practice`: the caller's clinic.

use async_graphql::{ID, SimpleObject};

/// The caller's practice.
#[derive(SimpleObject)]
pub struct Practice {
    /// The practice's id.
    pub id: ID,
    /// The practice's name.
    pub name: String,
    /// The IANA time zone the practice works in, e.g. "Europe/London"; "UTC" until set. Times
    /// in the API stay instants with an offset whatever it is.
    pub timezone: String,
}

impl From<crate::store::practices::Practice> for Practice {
    fn from(practice: crate::store::practices::Practice) -> Self {
        Practice {
            id: ID(practice.id),
            name: practice.name,
            timezone: practice.timezone,
        }
    }
}
