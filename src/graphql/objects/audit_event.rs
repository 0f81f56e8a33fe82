//! `AuditEvent`: a record of the audit log.

use async_graphql::{ID, Object, SimpleObject};

use super::AuditEvent;
use super::page::PageInfo;
use crate::graphql::scalars::DateTime;

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
