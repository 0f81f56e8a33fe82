//! The audit log: the `auditEvents` query. Writes record themselves in the store, in their own
//! transactions; reads are noted as resolvers hand them out (`read_log`) and recorded by the
//! execute stage before the response leaves.

use async_graphql::{Context, ID, Object, Result};

use super::access::authorize;
use super::error::OrFail;
use super::objects::{AuditEvent, AuditEventData, PageInfo, items};
use super::options::DateRange;
use super::pagination::Pagination;
use super::store;
use crate::auth::OperationKind;
use crate::store::audit::AuditFilter;

#[derive(Default)]
pub struct AuditQueries;

#[Object]
impl AuditQueries {
    /// The audit log, newest first: every read of patient data and every write, with who did
    /// it and when. "Who looked at this patient" is `auditEvents(patientId: ...)`. Needs
    /// `settings`.
    async fn audit_events(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Only events about this patient.")] patient_id: Option<ID>,
        #[graphql(desc = "Only events by this staff user or API token.")] actor_id: Option<ID>,
        #[graphql(desc = "Only events within this span of time.")] date_range: Option<DateRange>,
        #[graphql(desc = "Which page; default page 1 of 25.")] pagination: Option<Pagination>,
    ) -> Result<Option<AuditEventData>> {
        let principal = authorize(ctx, OperationKind::Query)?;
        let page = Pagination::request(pagination)?;
        let filter = AuditFilter {
            patient_id: patient_id.map(|id| id.0),
            actor_id: actor_id.map(|id| id.0),
            at: date_range.map(DateRange::bounds).transpose()?,
        };
        let found = store(ctx)
            .practice(&principal.practice_id)
            .list_audit_events(&filter, page)
            .await
            .or_fail()?;
        Ok(Some(AuditEventData {
            page_info: Some(PageInfo::of(page, &found)),
            data: items(found.items, AuditEvent),
        }))
    }
}
