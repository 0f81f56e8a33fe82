//! Labels: the practice's catalogue of tags for patients: the `labels` query and the label
//! mutations.

use async_graphql::{Context, ID, Object, Result};

use super::access::{authorize, authorize_write};
use super::error::{OrFail, bad_input};
use super::input::{MAX_LINE_CHARS, optional_text, required_text};
use super::objects::{Label, LabelData, PageInfo, ResponsePayload, envelope, items};
use super::pagination::Pagination;
use super::store;
use crate::auth::OperationKind;

/// Checks a colour: `#rgb` or `#rrggbb`.
pub(super) fn color(value: Option<String>) -> Result<Option<String>> {
    let Some(value) = optional_text("color", value, 7)? else {
        return Ok(None);
    };
    let hex = value.strip_prefix('#').unwrap_or("");
    if !matches!(hex.len(), 3 | 6) || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(bad_input(format!(
            "color must be a hex colour such as #e11d48 or #f00, got {value:?}"
        )));
    }
    Ok(Some(value.to_lowercase()))
}

#[derive(Default)]
pub struct LabelQueries;

#[Object]
impl LabelQueries {
    /// A page of the practice's labels, by title. Needs `labels:read`.
    async fn labels(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "Which page; default page 1 of 25.")] pagination: Option<Pagination>,
    ) -> Result<Option<LabelData>> {
        let principal = authorize(ctx, OperationKind::Query)?;
        let page = Pagination::request(pagination)?;
        let result = store(ctx)
            .practice(&principal.practice_id)
            .list_labels(page)
            .await
            .or_fail()?;
        Ok(Some(LabelData {
            page_info: Some(PageInfo::of(page, &result)),
            data: items(result.items, Label::from),
        }))
    }
}

#[derive(Default)]
pub struct LabelMutations;

#[Object]
impl LabelMutations {
    /// Adds a label to the catalogue. Refused if another label has the title. Needs
    /// `labels:write`.
    async fn create_label(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The title, 1 to 200 characters, unique within the practice.")]
        title: String,
        #[graphql(desc = "A hex colour such as #e11d48.")] color: Option<String>,
    ) -> Result<Option<ResponsePayload<Label>>> {
        let practice = authorize_write(ctx)?;
        let title = required_text("title", title, MAX_LINE_CHARS)?;
        let color = self::color(color)?;
        let change = practice
            .create_label(&title, color.as_deref())
            .await
            .or_fail()?;
        envelope(ctx, change, Label::from)
    }

    /// Changes a label's title or colour; the change shows on every patient with the label.
    /// Needs `labels:write`.
    async fn update_label(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The label's id.")] id: ID,
        #[graphql(desc = "A new title; omitted leaves it.")] title: Option<String>,
        #[graphql(desc = "A new colour; omitted leaves it.")] color: Option<String>,
    ) -> Result<Option<ResponsePayload<Label>>> {
        let practice = authorize_write(ctx)?;
        let title = match title {
            Some(t) => Some(required_text("title", t, MAX_LINE_CHARS)?),
            None => None,
        };
        let color = self::color(color)?;
        let change = practice
            .update_label(&id, title.as_deref(), color.as_deref())
            .await
            .or_fail()?;
        envelope(ctx, change, Label::from)
    }

    /// Removes a label from the catalogue and from every patient and product that has it
    /// (a patient.label.removed for each patient, a product.updated for each product). Needs
    /// `labels:write`.
    async fn delete_label(
        &self,
        ctx: &Context<'_>,
        #[graphql(desc = "The label's id.")] id: ID,
    ) -> Result<Option<ResponsePayload<Label>>> {
        let practice = authorize_write(ctx)?;
        let change = practice.delete_label(&id).await.or_fail()?;
        envelope(ctx, change, Label::from)
    }
}
