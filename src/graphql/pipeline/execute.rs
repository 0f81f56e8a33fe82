//! The last stage: the operation runs with what its resolvers need (the caller, the batch
//! loaders, the read log) and its response is written, every error with a code, failed fields
//! null, fields in selection order ([`run`]); then the reads of patient data it made are
//! recorded, and only then may it leave ([`deliver`]).

use std::sync::Arc;

use async_graphql::PathSegment;
use serde_json::{Map, Value, json};

use futures_util::StreamExt;
use futures_util::stream::BoxStream;

use super::Caller;
use super::order::in_selection_order;
use super::prepare::{Chosen, Prepared};
use super::reads::{ReadAudit, Running};
use super::rejection::{Rejection, Stop};
use super::validated::{Validated, Validation};
use crate::auth::OperationKind;
use crate::graphql::error::code;
use crate::graphql::events::Connection;
use crate::graphql::read_log::ReadLog;
use crate::graphql::{ApiSchema, ClientAddress, loaders};
use crate::store::Store;
use crate::store::audit::{Actor, Read, Reads};
use async_graphql::parser::types::ExecutableDocument;

/// An operation's response.
#[derive(Clone, Debug, PartialEq)]
pub struct Executed {
    /// `{ data?, errors?, extensions }`.
    pub body: Value,
    /// False when the operation did not run at all (validation failed): the body has no
    /// `data` then.
    pub ran: bool,
}

/// An operation that has run, whose reads of patient data are not recorded yet: nothing of it
/// may leave before they are (see [`deliver`]).
pub struct Ran {
    pub executed: Executed,
    /// Who read what, when a principal ran it.
    reads: Option<Reads>,
    /// What the query cost, for a refusal to say.
    cost: Value,
    /// Counted as running until its reads are recorded (or it is dropped).
    running: Running,
}

impl Ran {
    /// The reads of patient data the response carries.
    pub fn reads(&self) -> &[Read] {
        self.reads.as_ref().map_or(&[], |r| &r.reads)
    }
}

/// What becomes of an operation's responses: where its reads of patient data are noted, its
/// cost, and its selections' order.
struct Built {
    /// Where its reads of patient data are noted, and whose they are.
    log: Option<(Arc<ReadLog>, String, Actor)>,
    cost: Value,
    chosen: Chosen,
}

impl Built {
    /// The reads noted so far, taken.
    fn reads(&self) -> Option<Reads> {
        self.log.as_ref().map(|(log, practice_id, actor)| Reads {
            practice_id: practice_id.clone(),
            actor: actor.clone(),
            reads: log.take(),
        })
    }

    /// A response written as the API writes them, fields in selection order.
    fn finish(&self, response: async_graphql::Response, request_id: Option<&str>) -> Executed {
        let mut executed = render(response, request_id);
        if let (Some(data), Some(definition)) =
            (executed.body.get_mut("data"), self.chosen.definition())
        {
            in_selection_order(
                data,
                &definition.node.selection_set.node,
                self.chosen.document(),
            );
        }
        executed.body["extensions"]["cost"] = self.cost.clone();
        executed
    }
}

/// Makes the request of `prepared` for `caller`: the reads of patient data it makes are noted
/// as resolvers hand them out, a query's and what a mutation's result reaches beyond its own
/// record.
fn build(
    store: &Store,
    prepared: Prepared,
    caller: Caller,
    without_absent: Option<ExecutableDocument>,
) -> Result<(async_graphql::Request, Built), Rejection> {
    let chosen = prepared.chosen();
    if chosen.definition().is_none() {
        // The prepare stage chose it; a document without it cannot have come from there.
        return Err(Rejection::new(
            Stop::Document,
            code::GRAPHQL_VALIDATION_FAILED,
            "The operation to run is not in the document",
        ));
    }
    let Prepared {
        query,
        variables,
        extensions,
        document,
        operation,
        cost,
        ..
    } = prepared;
    let mut request = async_graphql::Request::new(query).variables(variables);
    if let Some(name) = operation.name.clone() {
        request = request.operation_name(name);
    }
    for (key, value) in extensions {
        if let Ok(value) = async_graphql::Value::from_json(value) {
            request.extensions.insert(key, value);
        }
    }
    // The request's own copy: without the variables it leaves out, when it leaves some out
    // (see `absent`).
    request.set_parsed_query(without_absent.unwrap_or_else(|| (*document).clone()));
    let mut request = request.data(ClientAddress(caller.address));
    if let Some(key) = caller.key {
        request = request.data(key);
    }
    let mut log = None;
    if let Some(principal) = caller.principal {
        let read_log = Arc::new(ReadLog::new(operation.roots.clone()));
        // Only a query's request caches what it loads: a mutation reads what its own earlier
        // fields wrote, and a subscription's events show their records as they are at each.
        let cached = operation.kind == OperationKind::Query;
        request = loaders::install(request, store, &principal, cached);
        log = Some((
            read_log.clone(),
            principal.practice_id.clone(),
            principal.actor.clone(),
        ));
        request = request.data(read_log).data(principal);
    }
    Ok((request, Built { log, cost, chosen }))
}

/// The schema, validating documents in full, and the same schema validating them in
/// async-graphql's fast mode, for the documents known to pass (see [`super::validated`]).
#[derive(Clone)]
pub struct Schemas {
    pub strict: ApiSchema,
    pub fast: ApiSchema,
    pub validated: Validated,
}

/// A request to be validated and not run: the strict schema's [`StopBeforeExecution`]
/// answers it once validation has passed.
pub struct ValidateOnly;

/// Answers a request marked [`ValidateOnly`] with nothing once it has passed validation,
/// before any resolver runs; any other request goes on.
pub struct StopBeforeExecution;

impl async_graphql::extensions::ExtensionFactory for StopBeforeExecution {
    fn create(&self) -> Arc<dyn async_graphql::extensions::Extension> {
        Arc::new(StopBeforeExecution)
    }
}

#[async_graphql::async_trait::async_trait]
impl async_graphql::extensions::Extension for StopBeforeExecution {
    async fn execute(
        &self,
        ctx: &async_graphql::extensions::ExtensionContext<'_>,
        operation_name: Option<&str>,
        next: async_graphql::extensions::NextExecute<'_>,
    ) -> async_graphql::Response {
        if ctx.data_opt::<ValidateOnly>().is_some() {
            return async_graphql::Response::new(async_graphql::Value::Null);
        }
        next.run(ctx, operation_name).await
    }
}

impl Schemas {
    /// The errors of `prepared`'s document as sent, validated in full and not run.
    async fn check(&self, prepared: &Prepared) -> Vec<async_graphql::ServerError> {
        let mut request = async_graphql::Request::new(prepared.query.clone())
            .variables(prepared.variables.clone())
            .data(ValidateOnly);
        if let Some(name) = prepared.operation.name.clone() {
            request = request.operation_name(name);
        }
        request.set_parsed_query((*prepared.document).clone());
        self.strict.execute(request).await.errors
    }

    /// How `prepared` is to be validated, and the schema that does so.
    fn for_request(&self, prepared: &Prepared) -> (Validation, &ApiSchema) {
        let validation = match prepared.chosen().definition() {
            Some(definition) => self.validated.validation(
                &prepared.query,
                prepared.operation.name.as_deref(),
                &prepared.document,
                &definition.node,
                &prepared.variables,
            ),
            None => Validation::Full,
        };
        let schema = match validation {
            Validation::Known => &self.fast,
            Validation::Learn | Validation::Full => &self.strict,
        };
        (validation, schema)
    }
}

/// Runs `prepared` for `caller`, counted as `running` until its reads are recorded; see
/// [`build`]. A document that passes validation in full is known from then on (see
/// [`super::validated`]).
pub async fn run(
    schemas: &Schemas,
    store: &Store,
    prepared: Prepared,
    caller: Caller,
    running: Running,
) -> Result<Ran, Rejection> {
    let request_id = caller.request_id.clone();
    let (validation, schema) = schemas.for_request(&prepared);
    let learn = (validation == Validation::Learn)
        .then(|| (prepared.query.clone(), prepared.operation.name.clone()));
    let without_absent = super::absent::leave_out_absent(
        &prepared.document,
        prepared.chosen().key(),
        &prepared.variables,
    );
    if without_absent.is_some() {
        // The document as sent must pass first: a use taken out could hide an error in it.
        let errors = schemas.check(&prepared).await;
        if !errors.is_empty() {
            let mut executed = render(
                async_graphql::Response::from_errors(errors),
                request_id.as_deref(),
            );
            executed.body["extensions"]["cost"] = prepared.cost.clone();
            return Ok(Ran {
                executed,
                reads: None,
                cost: prepared.cost,
                running,
            });
        }
    }
    let (request, built) = build(store, prepared, caller, without_absent)?;
    let response = schema.execute(request).await;
    let reads = built.reads();
    let executed = built.finish(response, request_id.as_deref());
    if let Some((query, operation)) = learn
        && executed.ran
    {
        schemas.validated.learn(&query, operation.as_deref());
    }
    Ok(Ran {
        executed,
        reads,
        cost: built.cost,
        running,
    })
}

/// Runs a subscription for `caller` on `connection`: each response it yields (an event, or
/// the errors that ended it) once the reads of patient data it carries are recorded. A read
/// that cannot be recorded ends the stream with that rejection.
pub fn subscribe(
    schemas: &Schemas,
    store: &Store,
    audit: ReadAudit,
    prepared: Prepared,
    caller: Caller,
    connection: Arc<Connection>,
) -> Result<BoxStream<'static, Result<Executed, Rejection>>, Rejection> {
    let request_id = caller.request_id.clone();
    // A subscription is validated once for its whole life: it is not worth learning from.
    let (_, schema) = schemas.for_request(&prepared);
    // A subscription's arguments mean the same null or absent (events(eventTypes, patientId,
    // after)): it runs as sent.
    let (request, built) = build(store, prepared, caller, None)?;
    let request = request.data(connection);
    let responses = schema.execute_stream(request);
    let built = Arc::new(built);
    let delivered = responses.then(move |response| {
        let (built, audit, request_id) = (built.clone(), audit.clone(), request_id.clone());
        async move {
            let executed = built.finish(response, request_id.as_deref());
            let recorded = match built.reads() {
                Some(reads) => audit.record(reads).await,
                None => true,
            };
            if recorded {
                Ok(executed)
            } else {
                Err(Rejection::new(
                    Stop::Unavailable,
                    code::SERVICE_UNAVAILABLE,
                    "The audit log could not be written, so the event is withheld; \
                     subscribe again with after",
                ))
            }
        }
    });
    // Nothing after a rejection.
    let mut failed = false;
    Ok(delivered
        .take_while(move |item| {
            let go_on = !failed;
            failed = item.is_err();
            std::future::ready(go_on)
        })
        .boxed())
}

/// Records the reads of an operation that ran, and then hands its response over; if they
/// cannot be recorded, the data is withheld.
pub async fn deliver(audit: &ReadAudit, ran: Ran) -> Result<Executed, Rejection> {
    let recorded = match ran.reads {
        Some(reads) => audit.record(reads).await,
        None => true,
    };
    drop(ran.running);
    if !recorded {
        return Err(Rejection::new(
            Stop::Unavailable,
            code::SERVICE_UNAVAILABLE,
            "The audit log could not be written, so the data read is withheld; try again \
             shortly",
        )
        .with_cost(ran.cost));
    }
    Ok(ran.executed)
}

/// Writes an executed response: every error gets a code, an internal error names the request
/// id (its details are in the log under it), a failed field is null, and a response that did
/// not run (validation failed) has no `data`.
fn render(response: async_graphql::Response, request_id: Option<&str>) -> Executed {
    let ran = !(response.data == async_graphql::Value::Null
        && !response.errors.is_empty()
        && response.errors.iter().all(|e| e.path.is_empty()));
    let mut body = Map::new();
    if ran {
        let mut data = response.data.into_json().unwrap_or(Value::Null);
        for err in &response.errors {
            null_at(&mut data, &err.path);
        }
        body.insert("data".into(), data);
    }
    if !response.errors.is_empty() {
        let errors = response
            .errors
            .into_iter()
            .map(|err| {
                let mut value = serde_json::to_value(&err).unwrap_or_else(|_| json!({}));
                let has_code = err
                    .extensions
                    .as_ref()
                    .is_some_and(|ext| ext.get("code").is_some());
                if !has_code {
                    let code = if ran {
                        code::BAD_USER_INPUT
                    } else {
                        code::GRAPHQL_VALIDATION_FAILED
                    };
                    value["extensions"]["code"] = json!(code);
                }
                if let Some(id) = request_id
                    && value["extensions"]["code"] == json!(code::INTERNAL_SERVER_ERROR)
                {
                    value["message"] = json!(format!("Internal server error (request id {id})"));
                    value["extensions"]["requestId"] = json!(id);
                }
                value
            })
            .collect();
        body.insert("errors".into(), Value::Array(errors));
    }
    if !response.extensions.is_empty() {
        body.insert(
            "extensions".into(),
            serde_json::to_value(&response.extensions).unwrap_or(Value::Null),
        );
    }
    Executed {
        body: Value::Object(body),
        ran,
    }
}

/// Puts `null` where a field failed. async-graphql 7 leaves a failed field out of its object
/// (and an object whose fields all failed becomes null) where the GraphQL specification wants
/// the field present and null (async-graphql issue #1549). Every field of our schema that can
/// fail is nullable, so null is the right value there.
fn null_at(data: &mut Value, path: &[PathSegment]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut here = data;
    for segment in parents {
        if here.is_null() {
            *here = Value::Object(Map::new());
        }
        here = match (segment, here) {
            (PathSegment::Field(name), Value::Object(map)) => {
                map.entry(name.clone()).or_insert(Value::Null)
            }
            (PathSegment::Index(i), Value::Array(items)) => match items.get_mut(*i) {
                Some(item) => item,
                None => return,
            },
            _ => return,
        };
    }
    if here.is_null() {
        *here = Value::Object(Map::new());
    }
    if let (PathSegment::Field(name), Value::Object(map)) = (last, here) {
        map.entry(name.clone()).or_insert(Value::Null);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_fields_become_null() {
        use PathSegment::{Field, Index};
        let mut data = json!({ "bookings": { "data": [null, { "id": "b" }] } });
        let field = |s: &str| Field(s.to_string());
        null_at(
            &mut data,
            &[field("bookings"), field("data"), Index(0), field("patient")],
        );
        null_at(
            &mut data,
            &[field("bookings"), field("data"), Index(0), field("doctor")],
        );
        null_at(
            &mut data,
            &[field("bookings"), field("data"), Index(1), field("patient")],
        );
        null_at(&mut data, &[field("other")]);
        assert_eq!(
            data,
            json!({
                "bookings": { "data": [
                    { "patient": null, "doctor": null },
                    { "id": "b", "patient": null }
                ] },
                "other": null
            })
        );
        let mut root = Value::Null;
        null_at(&mut root, &[field("patients")]);
        assert_eq!(root, json!({ "patients": null }));
    }
}
