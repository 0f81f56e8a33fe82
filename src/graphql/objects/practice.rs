//! `Practice`: the caller's clinic, with its settings that clients read to make sense of the
//! rest (locations, appointment types, access groups, number definitions).

use async_graphql::{Context, ID, Object, Result};

use super::page::items;
use super::product::{PracticeAccessGroups, PracticeLocation, PracticeNumbers, Product};
use crate::auth::{Access, Resource};
use crate::graphql::access::{principal, require};
use crate::graphql::error::{OrFail, internal};
use crate::graphql::store;

/// The caller's practice (see the impl).
pub struct Practice(pub crate::store::practices::Practice);

impl From<crate::store::practices::Practice> for Practice {
    fn from(practice: crate::store::practices::Practice) -> Self {
        Practice(practice)
    }
}

/// The caller's practice. Any valid token may read it, its settings included: they are what
/// a client needs to read patients and bookings (the names of numbers, groups and places);
/// its products (`appointmentTypes`, a location's `servicesProvided`) need `bookings:read`.
#[Object]
impl Practice {
    /// The practice's id.
    async fn id(&self) -> ID {
        ID(self.0.id.clone())
    }
    /// The practice's name.
    async fn name(&self) -> &str {
        &self.0.name
    }
    /// The IANA time zone the practice works in, e.g. "Europe/London"; "UTC" until set. Times
    /// in the API stay instants with an offset whatever it is (the API this one follows reads
    /// them as the practice's wall clock; practice-api does not).
    async fn timezone(&self) -> &str {
        &self.0.timezone
    }
    /// The practice's locations, by site and name (at most 200). Needs `bookings:read`, as
    /// the root `locations` does.
    async fn locations(&self, ctx: &Context<'_>) -> Result<Option<Vec<Option<PracticeLocation>>>> {
        require(ctx, Resource::Bookings, Access::Read)?;
        let mut found = self.settings(ctx)?.list_locations().await.or_fail()?;
        found.sort_by(|a, b| (a.site(), &a.name).cmp(&(b.site(), &b.name)));
        Ok(items(found, PracticeLocation))
    }
    /// The practice's appointment types, active or not, by name (at most 200): the products
    /// of type "appointment". Needs `bookings:read`, as `products` does: a product carries
    /// its cost and comments.
    async fn appointment_types(&self, ctx: &Context<'_>) -> Result<Option<Vec<Option<Product>>>> {
        require(ctx, Resource::Bookings, Access::Read)?;
        let found = self
            .settings(ctx)?
            .list_all_appointment_types()
            .await
            .or_fail()?;
        Ok(items(found, Product))
    }
    /// The practice's access groups, by name (at most 100).
    async fn access_groups(
        &self,
        ctx: &Context<'_>,
    ) -> Result<Option<Vec<Option<PracticeAccessGroups>>>> {
        let found = self.settings(ctx)?.list_access_groups().await.or_fail()?;
        Ok(items(found, PracticeAccessGroups::from))
    }
    /// The numbers the practice records of its patients, the primary one first (at most 50).
    async fn practice_numbers(
        &self,
        ctx: &Context<'_>,
    ) -> Result<Option<Vec<Option<PracticeNumbers>>>> {
        let found = self
            .settings(ctx)?
            .list_number_definitions()
            .await
            .or_fail()?;
        Ok(items(found, PracticeNumbers::from))
    }
}

impl Practice {
    /// The caller's practice.
    pub async fn of_caller(ctx: &Context<'_>) -> Result<Practice> {
        let principal = principal(ctx)?;
        let practice = store(ctx)
            .find_practice(&principal.practice_id)
            .await
            .or_fail()?
            .ok_or_else(|| internal("the caller's practice does not exist"))?;
        Ok(Practice(practice))
    }

    /// The store of the practice: the caller's, which is the only one it ever sees.
    fn settings<'c>(&self, ctx: &Context<'c>) -> Result<crate::store::PracticeStore<'c>> {
        let principal = principal(ctx)?;
        Ok(store(ctx).practice(&principal.practice_id))
    }
}
