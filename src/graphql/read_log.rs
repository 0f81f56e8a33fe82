//! The reads of patient data one operation makes. Resolvers note each record of patient data
//! they hand out ([`note_read`]) into the request's [`ReadLog`]; the execute stage records the
//! log in the audit log before the response leaves, and withholds the data if it cannot.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_graphql::Context;

use crate::store::audit::Read;

/// The reads of patient data one operation makes, to be recorded before its response leaves.
#[derive(Debug, Default)]
pub struct ReadLog {
    /// The operation's root fields, by response key (an alias, or the field's name).
    roots: HashMap<String, String>,
    reads: Mutex<Vec<Read>>,
}

impl ReadLog {
    /// A log for an operation with these root fields (by response key).
    pub fn new(roots: HashMap<String, String>) -> ReadLog {
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
    let Some(log) = ctx.data_opt::<Arc<ReadLog>>() else {
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
