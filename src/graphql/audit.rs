//! The audit log: the `auditEvents` query, and the reads a query makes of patient data.
//!
//! Writes record themselves in the store, in their own transactions. Reads are noted here as
//! resolvers hand out patients and bookings ([`note_read`]), into the request's [`ReadLog`];
//! the HTTP layer records them before the response leaves, and withholds the data if it
//! cannot.

use std::collections::HashMap;
use std::sync::Mutex;

use async_graphql::parser::types::ExecutableDocument;
use async_graphql::{Context, ID, Object, Result, SimpleObject};

use super::access::authorize;
use super::error::OrFail;
use super::options::DateRange;
use super::pagination::{PageInfo, Pagination, items};
use super::scalars::DateTime;
use super::{find_operation, for_each_root_field, store};
use crate::auth::OperationKind;
use crate::store::audit::{self as stored, AuditFilter, Read};

pub struct AuditEvent(stored::AuditEvent);

/// Something that happened in the practice: a read of patient data, or a write.
#[Object]
impl AuditEvent {
    /// The event's id.
    async fn id(&self) -> ID {
        ID(self.0.id.clone())
    }
    /// When it happened.
    async fn at(&self) -> DateTime {
        DateTime::from_ms(self.0.at)
    }
    /// Who did it: "user" (a signed-in staff user), "token" (an API token) or "operator"
    /// (the command line).
    async fn actor_type(&self) -> &str {
        &self.0.actor_type
    }
    /// The staff user's id (User.id), or the API token's (ApiToken.id).
    async fn actor_id(&self) -> ID {
        ID(self.0.actor_id.clone())
    }
    /// The user's or token's name at the time.
    async fn actor_name(&self) -> Option<&str> {
        self.0.actor_name.as_deref()
    }
    /// What was done: "read", "create", "update", "delete", "archive", "unarchive",
    /// "add_label", "remove_label", "sign_in", "sign_in_failed", "sign_out", "revoke".
    async fn action(&self) -> &str {
        &self.0.action
    }
    /// The root field of the operation that did it ("patient", "addPatientLabel"), or the
    /// command ("user create").
    async fn operation(&self) -> Option<&str> {
        self.0.operation.as_deref()
    }
    /// The kind of record: "patient", "booking", "label", "location", "appointment_type",
    /// "user", "token" or "practice".
    async fn resource_type(&self) -> Option<&str> {
        self.0.resource_type.as_deref()
    }
    /// The record's id.
    async fn resource_id(&self) -> Option<ID> {
        self.0.resource_id.clone().map(ID)
    }
    /// The patient the record belongs to, when it belongs to one.
    async fn patient_id(&self) -> Option<ID> {
        self.0.patient_id.clone().map(ID)
    }
}

/// A page of audit events, newest first.
#[derive(SimpleObject)]
pub struct AuditEventData {
    /// The events on this page.
    pub data: Option<Vec<Option<AuditEvent>>>,
    /// Where this page sits in the list.
    pub page_info: Option<PageInfo>,
}

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

/// The reads of patient data one operation makes, to be recorded before its response leaves.
#[derive(Debug, Default)]
pub struct ReadLog {
    /// The operation's root fields, by response key (an alias, or the field's name).
    roots: HashMap<String, String>,
    reads: Mutex<Vec<Read>>,
}

impl ReadLog {
    /// A log for the operation `operation_name` of `doc`.
    pub fn new(doc: &ExecutableDocument, operation_name: Option<&str>) -> ReadLog {
        let mut roots = HashMap::new();
        if let Some(operation) = find_operation(doc, operation_name) {
            for_each_root_field(&operation.node.selection_set.node, doc, &mut |field| {
                let key = field.response_key().node.to_string();
                roots.insert(key, field.name.node.to_string());
            });
        }
        ReadLog {
            roots,
            reads: Mutex::default(),
        }
    }

    /// The reads noted so far, each once.
    pub fn take(&self) -> Vec<Read> {
        let mut reads = std::mem::take(&mut *self.reads.lock().unwrap_or_else(|e| e.into_inner()));
        reads.sort_unstable_by(|a, b| {
            (&a.operation, a.resource_type, &a.resource_id).cmp(&(
                &b.operation,
                b.resource_type,
                &b.resource_id,
            ))
        });
        reads.dedup();
        reads
    }
}

/// Notes that a resolver hands out a record of patient data. The record a mutation returns is
/// not noted (its write is recorded); what its result reaches beyond it is.
pub fn note_read(
    ctx: &Context<'_>,
    resource_type: &'static str,
    resource_id: &str,
    patient_id: Option<&str>,
) {
    let Some(log) = ctx.data_opt::<std::sync::Arc<ReadLog>>() else {
        return;
    };
    // The root of the path is the response key of the operation's root field.
    let mut node = ctx.path_node.as_ref();
    let mut key = None;
    while let Some(here) = node {
        if let async_graphql::QueryPathSegment::Name(name) = here.segment {
            key = Some(name);
        }
        node = here.parent;
    }
    let operation = key
        .map(|key| log.roots.get(key).map_or(key, String::as_str))
        .unwrap_or_default();
    let read = Read {
        operation: operation.to_string(),
        resource_type,
        resource_id: resource_id.to_string(),
        patient_id: patient_id.map(str::to_string),
    };
    log.reads
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(read);
}
